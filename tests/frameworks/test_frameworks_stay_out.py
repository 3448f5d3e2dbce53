"""The frameworks these tests drive are test dependencies only: importing ``supervisor``
(or running its command line) loads none of them."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

FRAMEWORKS = ("pydantic_ai", "fastmcp", "langchain", "langchain_core", "langgraph", "agents", "openai")


def test_importing_supervisor_loads_no_framework() -> None:
    probe = (
        "import sys\n"
        "import supervisor, supervisor.cli.main\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout
