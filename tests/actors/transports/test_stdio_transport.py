"""The stdio transport and pidfiles against real subprocesses (real clock, bounded waits).

The autouse leak check in conftest.py runs after every test here: a test whose
teardown leaves any process alive fails even if its own asserts pass.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.log_events import event_name
from actors.protocol.errors import FramingError
from actors.protocol.jsonrpc import parse_message, to_wire
from actors.protocol.messages import Message, Notification
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError, TransportClosed
from actors.transports.pidfiles import (
    pids_dir,
    read_pidfile,
    read_proc_stat,
    reap_orphans,
    write_pidfile,
)
from actors.transports.process_group import spawned_process_groups
from actors.transports.stderr_tail import CUT_MARKER, STDERR_LINE_MAX
from actors.transports.stdio import StdioConnector, StdioTransport, open_stdio_transport
from tests.support.paths import TESTS

BOUND_S = 5.0  # generous upper bound per wait; the tests take far less


def make_spec(argv: list[str], **kwargs: Any) -> ServerSpec:
    return ServerSpec(name="mini", command=tuple(argv), **kwargs)


class Lines:
    """JSON-RPC messages as plain dicts over a transport, for the tests."""

    def __init__(self, transport: StdioTransport) -> None:
        self.transport = transport
        self.pending: list[Message] = []

    async def next(self) -> dict[str, Any]:
        while not self.pending:
            self.pending = list(await self.transport.receive())
            if not self.pending:
                raise EOFError
        return to_wire(self.pending.pop(0))

    async def send(self, message: dict[str, Any]) -> None:
        await self.transport.send([parse_message(message)])


async def initialize(transport: StdioTransport, version: str = "2025-06-18") -> dict[str, Any]:
    lines = Lines(transport)
    await lines.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}},
        }
    )
    return await lines.next()


async def read_all(transport: StdioTransport) -> list[Message]:
    """Every message until the end of stdout."""
    received: list[Message] = []
    while messages := await transport.receive():
        received.extend(messages)
    return received


def say(*words: str) -> str:
    """Shell lines that print each word as a JSON-RPC notification (its method)."""
    return "".join(f'echo \'{{"jsonrpc": "2.0", "method": "{word}"}}\'\n' for word in words)


def methods(messages: list[Message]) -> list[str]:
    return [m.method for m in messages if isinstance(m, Notification)]


async def wait_for_stderr(transport: StdioTransport, needle: str) -> str:
    while True:
        for line in transport.stderr_tail():
            if needle in line:
                return line
        await trio.sleep(0.01)


async def eventually(predicate: Callable[[], bool]) -> None:
    """Poll until ``predicate()`` holds (callers bound it with fail_after)."""
    while True:
        if predicate():
            return
        await trio.sleep(0.005)


def gone(pid: int) -> bool:
    stat = read_proc_stat(pid)
    return stat is None or stat.state == "Z"


# -- spawning ---------------------------------------------------------------------------


async def test_initialize_round_trip(mini_server_argv: list[str]) -> None:
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec(mini_server_argv)) as t:
            reply = await initialize(t, "2025-03-26")
            assert reply["id"] == 1
            assert reply["result"]["protocolVersion"] == "2025-03-26"
            assert t.describe() == f"pid={t.pid} cmd={Path(sys.executable).name}"
            assert t.pid in spawned_process_groups()
            assert read_proc_stat(t.pid) is not None
            assert read_proc_stat(t.pid).pgrp == t.pid  # type: ignore[union-attr]
        assert t.returncode == 0  # left on its own when stdin closed


async def test_connector_opens_a_transport(mini_server_argv: list[str], tmp_path: Path) -> None:
    connector = StdioConnector(tmp_path)
    with trio.fail_after(BOUND_S):
        async with connector(make_spec(mini_server_argv)) as t:
            assert (await initialize(t))["result"]["serverInfo"]["name"] == "mini-server"


async def test_missing_command_is_a_spawn_error() -> None:
    with pytest.raises(SpawnError) as err:
        async with open_stdio_transport(make_spec(["no-such-mcp-server-x9"], env={"PATH": "/nowhere:/none"})):
            pytest.fail("must not start")
    assert str(err.value) == (
        "mcp server mini: command 'no-such-mcp-server-x9' not found on PATH (/nowhere:/none); install it, "
        "give its full path in the server's command, or set PATH in the server's env"
    )


async def test_empty_command_is_a_spawn_error() -> None:
    with pytest.raises(SpawnError, match="mcp server mini: no command configured"):
        async with open_stdio_transport(make_spec([])):
            pytest.fail("must not start")


async def test_bad_cwd_is_a_spawn_error(mini_server_argv: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(SpawnError, match=r"working directory .*nope.* does not exist"):
        async with open_stdio_transport(make_spec(mini_server_argv, cwd=str(missing))):
            pytest.fail("must not start")


async def test_exec_failure_is_a_spawn_error(tmp_path: Path) -> None:
    not_a_program = tmp_path / "server"
    not_a_program.write_bytes(b"\x00\x01\x02 not an executable format\n")
    not_a_program.chmod(0o755)
    with pytest.raises(SpawnError, match=r"mcp server mini: could not start .*Exec format error"):
        async with open_stdio_transport(make_spec([str(not_a_program)])):
            pytest.fail("must not start")


async def test_command_is_found_on_the_spec_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "my-mcp-server"
    script.write_text("#!/bin/sh\n" + say("found-me"))
    script.chmod(0o755)
    spec = make_spec(["my-mcp-server"], env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(spec) as t:
            assert methods(await read_all(t)) == ["found-me"]


async def test_env_and_cwd_reach_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEST_INHERITED", "from-parent")
    code = (
        "import json, os; e = os.environ; "
        "print(json.dumps({'jsonrpc': '2.0', 'method': 'env', "
        "'params': [e['MCP_TEST_INHERITED'], e['MCP_TEST_OWN'], os.getcwd()]}))"
    )
    spec = make_spec([sys.executable, "-c", code], env={"MCP_TEST_OWN": "from-spec"}, cwd=str(tmp_path))
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(spec) as t:
            out = await read_all(t)
    assert out == [Notification("env", ["from-parent", "from-spec", str(tmp_path)])]


async def test_relative_command_path_is_taken_from_cwd(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n" + say("relative-ok"))
    script.chmod(0o755)
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec(["./server.sh"], cwd=str(tmp_path))) as t:
            assert methods(await read_all(t)) == ["relative-ok"]


# -- framing ------------------------------------------------------------------------------

ECHO_LINES = (
    "import sys\nfor line in sys.stdin.buffer:\n    sys.stdout.buffer.write(line)\n    sys.stdout.flush()\n"
)


async def test_messages_before_a_bad_line_come_first_then_the_error() -> None:
    code = (
        'import sys; sys.stdout.write(\'{"jsonrpc": "2.0", "method": "a"}\\n'
        '{"jsonrpc": "2.0", "method": "b"}\\nnot json\\n\'); sys.stdout.flush()'
    )
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec([sys.executable, "-c", code])) as t:
            received: list[Message] = []
            with pytest.raises(FramingError, match="line is not JSON"):
                while True:
                    received.extend(await t.receive())
            assert received == [Notification("a"), Notification("b")]


async def test_a_burst_is_handed_out_a_read_of_16_kb_at_a_time() -> None:
    """Each read is decoded and handled before another task runs: a server that sends
    1 MB at once (a log flood) must hold the loop every server shares for 16 KB's worth
    at a time, not a pipe's worth (issue 28)."""
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"' + b"x" * 60
    line += b'"}}\n'
    code = f"import sys, time; sys.stdout.buffer.write({line!r} * 8000); sys.stdout.flush(); time.sleep(30)"
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec([sys.executable, "-c", code])) as t:
            batches: list[int] = []
            while sum(batches) < 8000:
                batches.append(len(await t.receive()))
    assert (max(batches) - 1) * len(line) <= 16384, max(batches)  # and the line a read completes


async def test_what_the_pipe_did_not_take_at_once_is_written_first_by_the_next_send() -> None:
    big = Notification("big", {"text": "x" * 1_000_000})  # more than a pipe holds (64 KB)
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec([sys.executable, "-c", ECHO_LINES])) as t:
            assert not t.send_nowait([big])  # a part went; the rest is kept
            assert not t.send_nowait([Notification("after")])  # never ahead of that rest
            await t.send([])  # writes what was kept
            await t.send([Notification("last")])
            lines = Lines(t)
            assert await lines.next() == to_wire(big)
            assert [(await lines.next())["method"] for _ in range(2)] == ["after", "last"]
            assert t.send_nowait([Notification("small")])  # room again: all of it at once
            assert (await lines.next())["method"] == "small"


# -- stderr ------------------------------------------------------------------------------


async def test_stderr_tail_keeps_the_last_200_lines(mini_server_argv: list[str]) -> None:
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec([*mini_server_argv, "--stderr-lines", "250"])) as t:
            await wait_for_stderr(t, "stderr line 249")
            assert t.stderr_tail() == [f"stderr line {i}" for i in range(50, 250)]
            t.stderr_tail().clear()  # a copy: the caller cannot damage the buffer
            assert len(t.stderr_tail()) == 200


async def test_stderr_lines_are_cut_and_redacted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="actors.transports.stdio")
    secret = "sk-live-0123456789abcdef"
    code = (
        "import sys; w = sys.stderr.write; "
        f"w('using key {secret}\\n'); w('Authorization: Bearer abc.def\\n'); "
        "w('y' * 10_000_000 + '\\n'); "
        f"w('z' * 4090 + '{secret}' + 'w' * 10000 + '\\n'); "
        "w('partial-then-crlf\\r\\n'); w('the end\\n'); sys.stderr.flush()"
    )
    spec = make_spec([sys.executable, "-c", code], secrets=(secret,))
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(spec) as t:
            await wait_for_stderr(t, "the end")
            tail = t.stderr_tail()
    assert tail == [
        "using key ***",
        "Authorization: ***",
        "y" * STDERR_LINE_MAX + CUT_MARKER,
        # The secret straddled the cut: it is masked whole, not cut into a prefix.
        ("z" * 4090 + "***" + "w" * 10000)[:STDERR_LINE_MAX] + CUT_MARKER,
        "partial-then-crlf",
        "the end",
    ]
    assert secret not in caplog.text
    assert secret[:8] not in caplog.text
    lines = [r.fields for r in caplog.records if event_name(r) == "stderr"]  # type: ignore[attr-defined]
    assert {"server": "mini", "line": "using key ***"} in lines


# -- I/O errors ---------------------------------------------------------------------------


async def test_receive_returns_eof_and_send_fails_after_crash(mini_server_argv: list[str]) -> None:
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec(mini_server_argv)) as t:
            await initialize(t)
            await Lines(t).send(
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "crash"}}
            )
            assert await read_all(t) == []
            assert await t.receive() == []  # still EOF, not an error
            # EOF on stdout can come a moment before the kernel drops the stdin pipe's
            # read end; once the process is a zombie, every one of its fds is closed.
            await eventually(lambda: t.returncode is not None)
            with pytest.raises(TransportClosed, match="mcp server mini: cannot write"):
                await t.send([Notification("anyone there?")])
    assert t.returncode == 3


LAST_WORDS = (
    "import os, sys\n"
    'sys.stdout.write(\'{"jsonrpc": "2.0", "method": "bye"}\\n\'); sys.stdout.flush()\n'
    "sys.stderr.write('some noise\\nlast words %d\\n' % os.getpid()); sys.stderr.flush()\n"
    "os._exit(3)\n"
)


async def test_a_crashed_servers_last_stderr_line_is_known_by_its_eof() -> None:
    """The connection's failure reason quotes the last stderr line, read when stdout's EOF
    is seen: the kernel closes both pipes at the exit, but the hub reads stderr in its
    own task, so without waiting for it the line was missing now and then (under load,
    often). Many tries, because it is a race."""
    for _ in range(25):
        with trio.fail_after(BOUND_S):
            async with open_stdio_transport(make_spec([sys.executable, "-c", LAST_WORDS])) as t:
                assert await read_all(t) == [Notification("bye")]
                assert t.stderr_tail()[-1:] == [f"last words {t.pid}"]


async def crash_leaving_a_grandchild(t: StdioTransport) -> None:
    """Crash a ``--spawn-child`` server; its grandchild holds stdout open."""
    await initialize(t)
    line = await wait_for_stderr(t, "spawned child pid=")
    grandchild = int(line.rsplit("=", 1)[1])
    await Lines(t).send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "crash"}})
    # The grandchild inherited stdout; EOF comes because the group went down with its
    # leader (the exit was noticed), not at teardown.
    assert await read_all(t) == []
    assert t.returncode == 3
    await eventually(lambda: gone(grandchild))


async def test_crash_is_seen_even_when_a_grandchild_holds_stdout(
    mini_server_argv: list[str],
) -> None:
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec([*mini_server_argv, "--spawn-child"])) as t:
            await crash_leaving_a_grandchild(t)


async def test_exception_in_the_block_propagates_unwrapped(mini_server_argv: list[str]) -> None:
    with trio.fail_after(BOUND_S), pytest.raises(ValueError, match="boom"):
        async with open_stdio_transport(make_spec(mini_server_argv)) as t:
            raise ValueError("boom")
    assert t.returncode == 0


async def test_pidfile_lives_as_long_as_the_process(mini_server_argv: list[str], tmp_path: Path) -> None:
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec(mini_server_argv), state_dir=tmp_path) as t:
            (path,) = pids_dir(tmp_path).glob("*.json")
            record = read_pidfile(path)
            stat = read_proc_stat(t.pid)
            assert record is not None and stat is not None
            assert (record.pid, record.pgid, record.start_time) == (t.pid, t.pid, stat.start_time)
            assert (record.server, record.argv0) == ("mini", sys.executable)
            assert record.owner_pid == os.getpid()
    assert list(pids_dir(tmp_path).glob("*")) == []


# -- teardown -----------------------------------------------------------------------------


async def test_teardown_by_closing_stdin(mini_server_argv: list[str]) -> None:
    spec = make_spec(mini_server_argv, shutdown_grace_s=5.0)
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(spec) as t:
            await initialize(t)
        start = trio.current_time()
    assert t.returncode == 0
    assert trio.current_time() - start < 1.0  # did not sit out the 5 s grace


async def test_teardown_sigterm_when_stdin_close_is_ignored(mini_server_argv: list[str]) -> None:
    spec = make_spec([*mini_server_argv, "--ignore-stdin-close"], shutdown_grace_s=0.2)
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(spec) as t:
            await initialize(t)
            start = trio.current_time()
    assert t.returncode == -signal.SIGTERM
    assert 0.2 <= trio.current_time() - start < 1.0


async def test_teardown_sigkill_when_sigterm_is_ignored(mini_server_argv: list[str]) -> None:
    argv = [*mini_server_argv, "--ignore-stdin-close", "--ignore-sigterm"]
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec(argv, shutdown_grace_s=0.2)) as t:
            await initialize(t)
            start = trio.current_time()
    assert t.returncode == -signal.SIGKILL
    assert 0.4 <= trio.current_time() - start < 1.2


async def test_grandchild_left_by_a_polite_exit_is_killed(mini_server_argv: list[str]) -> None:
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(make_spec([*mini_server_argv, "--spawn-child"])) as t:
            await initialize(t)
            line = await wait_for_stderr(t, "spawned child pid=")
            grandchild = int(line.rsplit("=", 1)[1])
            stat = read_proc_stat(grandchild)
            assert stat is not None and stat.pgrp == t.pid and stat.state != "Z"
        assert t.returncode == 0  # the leader left on stdin close; its child did not
        await eventually(lambda: gone(grandchild))  # SIGKILL lands asynchronously


async def test_cancelled_scope_still_tears_everything_down(mini_server_argv: list[str]) -> None:
    argv = [*mini_server_argv, "--ignore-stdin-close", "--ignore-sigterm", "--spawn-child"]
    opened: list[StdioTransport] = []
    ready = trio.Event()
    scope = trio.CancelScope()

    async def user() -> None:
        with scope:
            async with open_stdio_transport(make_spec(argv, shutdown_grace_s=0.1)) as t:
                opened.append(t)
                await initialize(t)
                await wait_for_stderr(t, "spawned child pid=")
                ready.set()
                await t.receive()  # nothing more will come: blocks until cancelled
                pytest.fail("receive returned")

    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(user)
            await ready.wait()
            scope.cancel()
        assert scope.cancelled_caught
        (t,) = opened
        grandchild = int(t.stderr_tail()[0].rsplit("=", 1)[1])
        assert t.returncode == -signal.SIGKILL
        assert gone(t.pid)  # reaped: no zombie either
        await eventually(lambda: gone(grandchild))


# -- orphans of an earlier run ------------------------------------------------------------

# Plays a supervisor that spawns a server, writes its pidfile, then dies without cleanup.
PREVIOUS_RUN = r"""
import json, os, subprocess, sys, time
from pathlib import Path
from actors.transports.pidfiles import write_pidfile
state_dir, mode, argv = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
err = open(state_dir / "server-stderr.log", "w")
p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                     start_new_session=True)
write_pidfile(state_dir, pid=p.pid, pgid=p.pid, server="old", argv0=argv[0])
grandchild = 0
if mode == "mcp":  # wait until the server is set up: initialize answered
    p.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')
    p.stdin.flush()
    p.stdout.readline()
    text = (state_dir / "server-stderr.log").read_text()
    grandchild = int(text.split("spawned child pid=")[1].split()[0])
elif mode == "exit":
    p.wait()
print(p.pid, grandchild, flush=True)
os._exit(0)
"""


def previous_run(state_dir: Path, mode: str, argv: list[str]) -> tuple[int, int]:
    """Run a 'previous supervisor' that leaves its server behind; return (pid, grandchild)."""
    out = subprocess.run(
        [sys.executable, "-c", PREVIOUS_RUN, str(state_dir), mode, *argv],
        capture_output=True,
        timeout=BOUND_S,
        check=True,
    )
    pid, grandchild = map(int, out.stdout.split())
    return pid, grandchild


def kill_group(pgid: int) -> None:
    """Safety net so a failing test does not leak an orphan (not our child)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def test_reap_orphans_kills_the_group_left_by_a_crashed_run(
    mini_server_argv: list[str], tmp_path: Path
) -> None:
    argv = [*mini_server_argv, "--ignore-stdin-close", "--ignore-sigterm", "--spawn-child"]
    pid, grandchild = previous_run(tmp_path, "mcp", argv)
    try:
        assert not gone(pid) and not gone(grandchild)
        assert reap_orphans(tmp_path, grace_s=0.2) == [pid]
        assert gone(pid) and gone(grandchild)
        assert list(pids_dir(tmp_path).glob("*")) == []
    finally:
        kill_group(pid)


def test_reap_orphans_spares_a_process_whose_start_time_differs(tmp_path: Path) -> None:
    pid, _ = previous_run(tmp_path, "plain", ["sleep", "1000"])
    try:
        (path,) = pids_dir(tmp_path).glob("*.json")
        data = json.loads(path.read_text())
        data["start_time"] -= 1  # the pid now belongs to "another" process
        path.write_text(json.dumps(data))
        assert reap_orphans(tmp_path, grace_s=0.2) == []
        assert not gone(pid)
        assert not path.exists()  # the stale record is dropped
    finally:
        kill_group(pid)


def test_reap_orphans_drops_stale_and_corrupt_pidfiles(tmp_path: Path) -> None:
    previous_run(tmp_path, "exit", ["true"])
    (pids_dir(tmp_path) / "123-456.json").write_text("{not json")
    assert len(list(pids_dir(tmp_path).glob("*.json"))) == 2
    assert reap_orphans(tmp_path) == []
    assert list(pids_dir(tmp_path).glob("*")) == []


def test_reap_orphans_leaves_a_live_supervisors_servers_alone(tmp_path: Path) -> None:
    # This test process is the "other supervisor": its pidfile must survive, and so
    # must its server.
    proc = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        path = write_pidfile(tmp_path, pid=proc.pid, pgid=proc.pid, server="s", argv0="sleep")
        assert reap_orphans(tmp_path, grace_s=0.2) == []
        assert path.exists() and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_reap_orphans_without_a_state_dir_is_a_no_op(tmp_path: Path) -> None:
    assert reap_orphans(tmp_path / "never-created") == []


# -- the leak check itself ----------------------------------------------------------------

LEAKY_TEST = r"""
import subprocess
from actors.transports import process_group

def test_leaks():
    subprocess.Popen(["sleep", "30"], stdout=subprocess.DEVNULL)  # a child nobody waits for
    script = "setsid sleep 31 </dev/null >/dev/null 2>&1 & echo $!"
    out = subprocess.run(["sh", "-c", script], capture_output=True, check=True)
    orphan = int(out.stdout)  # not our child; only its process group gives it away
    process_group._recent_groups.append(orphan)
    print("ORPHAN", orphan)
"""


def test_leak_check_catches_children_and_group_members(tmp_path: Path) -> None:
    conftest = TESTS / "conftest.py"
    (tmp_path / "conftest.py").write_text(conftest.read_text())
    (tmp_path / "test_leaky.py").write_text(LEAKY_TEST)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=BOUND_S * 2,
    )
    out = result.stdout
    assert result.returncode == 1, out
    assert "processes outlived the test" in out
    assert "cmd=sleep 30" in out and "cmd=sleep 31" in out
    orphan = int(out.split("ORPHAN ")[1].split()[0])
    assert gone(orphan)  # and the check killed what it found
