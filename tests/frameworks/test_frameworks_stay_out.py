"""The agent frameworks are test dependencies only: a fresh interpreter that imports
``supervisor`` (the embedding API) and the ``mcp-supervisor`` command loads none of
them, so installing the package never needs one."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "fastmcp", "agents", "openai")


def test_importing_supervisor_loads_no_agent_framework() -> None:
    probe = (
        "import sys\nimport supervisor, supervisor.cli.main\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))\n"
    )
    command = [sys.executable, "-c", probe]
    loaded = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout
