"""The frameworks these tests drive are test dependencies or optional extras: importing
``supervisor`` (or running its command line, or importing ``supervisor.aio`` or the
adapters' package) loads none of them, and an adapter's module loads its own framework
only."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

FRAMEWORKS = ("pydantic_ai", "fastmcp", "langchain", "langchain_core", "langgraph", "agents", "openai")


def loaded_by(modules: str) -> str:
    """The frameworks a fresh interpreter has loaded after ``import modules``."""
    probe = (
        "import sys\n"
        f"import {modules}\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    return loaded.stdout.strip()


def test_importing_supervisor_loads_no_framework() -> None:
    assert loaded_by("supervisor, supervisor.cli.main, supervisor.aio, supervisor.adapters") == "[]"


def test_an_adapter_loads_its_own_framework_only() -> None:
    assert loaded_by("supervisor.adapters.pydantic_ai") == "['pydantic_ai']"
    assert loaded_by("supervisor.adapters.langchain") == "['langchain', 'langchain_core', 'langgraph']"
    assert loaded_by("supervisor.adapters.openai_agents") == "['agents', 'openai']"
