"""Our log records carry their fields in their message, for hosts that format them.

An embedding host with no logging setup of its own sees Python's ``lastResort``
handler (``%(message)s``, warnings and up); one that calls ``basicConfig`` sees
``LEVEL:logger:message``. Either way a line about a server must say which server and
what happened, not a bare ``state``. ``serve`` formats with ``StructuredFormatter``,
whose lines must not change (the golden transcript pins them).
"""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from actors.log_events import FieldsInMessage, get_logger
from actors.redaction import Redactor
from supervisor.runtime.logs import StructuredFormatter
from tests.support.paths import REPO

ROOT = REPO
# The two modules that may call logging.getLogger: the one that makes our loggers, and
# ``serve``'s configuration of the root logger.
MAKERS = {ROOT / "actors" / "log_events.py", ROOT / "supervisor" / "runtime" / "logs.py"}


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("actors.connection", logging.WARNING, __file__, 1, msg, args or None, None)
    record.created, record.msecs = 1704164645.678, 678.0
    record.__dict__.update(extra)
    return record


def test_every_logger_of_ours_comes_from_get_logger() -> None:
    offenders = []
    for path in sorted([*ROOT.joinpath("actors").rglob("*.py"), *ROOT.joinpath("supervisor").rglob("*.py")]):
        if path in MAKERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "getLogger"
                and isinstance(node.value, ast.Name)
                and node.value.id == "logging"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"use actors.log_events.get_logger instead of logging.getLogger: {offenders}"


def test_basic_config_format_shows_the_fields(caplog: pytest.LogCaptureFixture) -> None:
    import actors.connection.actor  # noqa: F401  (its logger is the one a host sees)

    log = logging.getLogger("actors.connection")
    with caplog.at_level(logging.INFO, logger="actors.connection"):
        log.warning(
            "state",
            extra={"fields": {"server": "time", "state": "backoff", "reason": "command 'python' not found"}},
        )
        log.error("cannot send %s", "ping", extra={"server": "flaky"})
        log.info("plain %d", 5)
    formatter = logging.Formatter(logging.BASIC_FORMAT)
    assert [formatter.format(record) for record in caplog.records] == [
        "WARNING:actors.connection:state server=time state=backoff reason=\"command 'python' not found\"",
        "ERROR:actors.connection:cannot send ping server=flaky",
        "INFO:actors.connection:plain 5",
    ]


def test_get_logger_attaches_the_filter_once() -> None:
    first = get_logger("tests.log_events.once")
    second = get_logger("tests.log_events.once")
    assert first is second
    assert sum(isinstance(f, FieldsInMessage) for f in first.filters) == 1


@pytest.mark.parametrize("json_lines", [False, True])
def test_structured_lines_are_the_same_with_fields_in_the_message(json_lines: bool) -> None:
    formatter = StructuredFormatter(Redactor(("s3cret-123456",)), json_lines=json_lines)
    cases = [
        ("state", (), {"fields": {"server": "a b", "state": "steady", "token": "s3cret-123456"}}),
        ("cannot send %s", ("x\ny",), {"server": "flaky"}),
        ("no fields %d%%", (3,), {}),
    ]
    for msg, args, extra in cases:
        plain = formatter.format(_record(msg, *args, **extra))
        filtered = _record(msg, *args, **extra)
        FieldsInMessage().filter(filtered)
        assert formatter.format(filtered) == plain


def test_an_embedding_without_logging_setup_says_which_server_failed_and_why(tmp_path: Path) -> None:
    """No handler at all: Python's lastResort prints warnings as ``%(message)s``."""
    script = textwrap.dedent(
        """
        import trio
        from actors.spec import ServerSpec, Start
        from actors.connection.vocabulary import State
        from supervisor import Supervisor
        from supervisor.settings.model import Config

        async def main() -> None:
            spec = ServerSpec(name="ghost", command=("no-such-mcp-server-xyz",), start=Start.EAGER)
            async with Supervisor.open(Config(servers=(spec,)), state_dir=STATE) as sup:
                with trio.fail_after(10):
                    await sup.router.cell.wait_until(lambda c: c.servers["ghost"].state is State.BACKOFF)

        trio.run(main)
        """
    ).replace("STATE", repr(str(tmp_path / "state")))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("state ")]
    assert lines, done.stderr
    assert lines[0].startswith("state server=ghost state=backoff prev=resolve "), lines
    assert "'no-such-mcp-server-xyz' not found on PATH" in lines[0], lines


async def test_a_secret_of_a_running_supervisor_never_reaches_a_hosts_formatter(tmp_path: Path) -> None:
    """The message built from fields is what a host's formatter prints: it masks the
    secrets of every supervisor opened in this process, and credential-shaped text."""
    from actors.spec import ServerSpec, Start
    from supervisor import Supervisor
    from supervisor.settings.model import Config

    secret = "s3cret-value-for-the-log-test-0123456789"
    spec = ServerSpec(name="quiet", command=("true",), start=Start.LAZY, secrets=(secret,))
    log = get_logger("tests.log_events.secrets")
    async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path / "state"):
        record = _record("state", fields={"server": "quiet", "reason": f"rejected {secret}"})
        log.handle(record)  # through the logger's filter, as a real call is
        record2 = _record("auth", fields={"header": "Authorization: Bearer abcdefghijklmnop123"})
        log.handle(record2)
    formatter = logging.Formatter(logging.BASIC_FORMAT)
    assert secret not in formatter.format(record)
    assert 'reason="rejected ***"' in record.getMessage(), record.getMessage()
    assert "abcdefghijklmnop123" not in formatter.format(record2), record2.getMessage()
