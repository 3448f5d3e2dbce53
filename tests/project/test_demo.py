"""The README's demo works from a fresh clone, without activating the virtualenv.

``config/demo.json`` names the interpreter its servers need (``.venv/bin/python``,
which ``.ci/setup`` creates, relative to the repository root): a bare ``python``
would be whatever the shell finds first, which has none of the demo's packages
unless the virtualenv happens to be active.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

# A PATH with no virtualenv on it (and no pyenv shims): a fresh, unactivated shell.
BARE_PATH = "/usr/bin:/bin"


def readme_embedding_example(heading: str = "## Embedding") -> str:
    """The first python block of the README from ``heading`` on."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"the README's {heading.lstrip('# ')} section has no python example"
    return match.group(1)


def run_unactivated(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in the repository, from a shell with no virtualenv on its PATH."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PATH": BARE_PATH, "HOME": str(home), "XDG_STATE_HOME": str(home / "state")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_readme_embedding_example_runs_without_activation(tmp_path: Path) -> None:
    done = run_unactivated(readme_embedding_example(), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "'ok': True" in done.stdout, (done.stdout, done.stderr)
    assert "'tool': 'time_get_current_time'" in done.stdout


def test_the_demo_config_names_the_virtualenv_interpreter() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "check", "--config", str(REPO / "config" / "demo.json")],
        env={"PATH": BARE_PATH},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "  time [local] .venv/bin/python -m mcp_server_time --local-timezone UTC (" in done.stdout
    assert "  flaky [local] .venv/bin/python tests/servers/mini_server.py --flaky 8 (" in done.stdout
