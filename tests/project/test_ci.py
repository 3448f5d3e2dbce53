"""CI runs what the README tells a user to run: its test command, as written."""

from __future__ import annotations

import re

from tests.support.paths import REPO


def readme_commands() -> list[str]:
    """The commands of the README's opening block, without their comments."""
    block = re.search(r"```sh\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL)
    assert block is not None, "the README opens with no sh block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_ci_runs_the_readmes_test_command() -> None:
    (test_command,) = [command for command in readme_commands() if "pytest" in command]
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci, (test_command, ".ci/run")
