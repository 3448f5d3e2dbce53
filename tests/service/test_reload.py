"""``Supervisor.reload`` against real subprocess servers (real clock): what is unchanged
keeps its process and its call in flight, what changed restarts, a bad file changes
nothing. The pure rules are in ``test_reload_plan.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.states import State
from actors.log_events import event_name
from supervisor import Supervisor
from supervisor.runtime.reload_plan import ReloadRefused
from supervisor.settings.loader import ConfigError, load_config
from tests.service.test_runtime_servers import AT_ONCE_S, BOUND_S, MINI, alive, pid_of, steady

LONG_DESCRIPTION_TOOLS = 3


def server(*args: str, **options: Any) -> dict[str, Any]:
    return {"command": [sys.executable, MINI, *args], "start": "eager", **options}


def write(path: Path, servers: dict[str, Any], **top: Any) -> Path:
    path.write_text(json.dumps({"servers": servers, "tool_search": {"enabled": False}, **top}))
    return path


async def test_a_reload_keeps_the_unchanged_and_restarts_the_changed(tmp_path: Path) -> None:
    """The unchanged server keeps its pid and its call in flight; the changed one gets
    a new process; the removed one stops; the new one starts; trust applies live."""
    file = write(
        tmp_path / "config.json",
        {"a": server(), "b": server(), "gone": server(), "c": server(call_timeout_ms=30_000)},
    )
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup, sup.session() as session:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("a", "b", "gone", "c"))
        pids = {name: await pid_of(sup, name) for name in ("a", "b", "gone", "c")}
        turn = await session.begin_turn()
        answered: list[Any] = []

        async def sleeper() -> None:
            answered.append(await turn.call("a_sleep", {"seconds": 1.5}))

        write(
            file,
            {
                "a": server(),
                "b": server("--tools", "1"),  # args changed: restart
                "c": server(call_timeout_ms=20_000, trusted=True),  # live keys only
                "new": server(),
            },
        )
        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sleeper)
                while (status := await sup.connection_status("a")) is None or status.in_flight < 1:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                plan = await sup.reload()
                assert not answered  # the reload did not wait for, nor end, a's call
            await sup.router.cell.wait_until(steady("a", "b", "c", "new"))
        (envelope,) = answered
        assert envelope.ok, envelope
        assert plan.report() == {
            "restarted": ["b"],
            "started": ["new"],
            "stopped": ["gone"],
            "applied_live": {"servers": {"c": ["trusted", "call_timeout_ms"]}, "settings": []},
            "new_sessions": [],
        }
        assert await pid_of(sup, "a") == pids["a"]
        assert await pid_of(sup, "c") == pids["c"]
        assert await pid_of(sup, "b") != pids["b"] and not alive(pids["b"])
        assert not alive(pids["gone"]) and "gone" not in sup.servers()
        assert sup.servers()["c"].spec.trusted and sup.servers()["c"].spec.call_timeout_s == 20.0
        assert sup.config.server("c").trusted
        after = await session.begin_turn()
        assert "b_tool_0" in after.catalog.tools and "b_tool_0" not in turn.catalog.tools
        assert (await after.call("new_echo", {"text": "hi"})).ok
        decision = session.first_word(after.catalog.tools["c_echo"], {"text": "x"})
        assert decision.reason.startswith("default for a trusted server"), decision


async def test_a_changed_file_secret_restarts_its_server(tmp_path: Path) -> None:
    """Expanded values are compared: the same ``${file:}`` text with new content restarts."""
    secret = tmp_path / "token.txt"
    secret.write_text("first-secret-value")
    file = write(tmp_path / "config.json", {"a": server(env={"TOKEN": "${file:token.txt}"}), "b": server()})
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("a", "b"))
            a_pid, b_pid = await pid_of(sup, "a"), await pid_of(sup, "b")
            assert (await sup.reload()).report()["restarted"] == []  # nothing changed yet
            assert await pid_of(sup, "a") == a_pid
            secret.write_text("second-secret-value")
            plan = await sup.reload()
            await sup.router.cell.wait_until(steady("a"))
        assert plan.report()["restarted"] == ["a"]
        assert await pid_of(sup, "a") != a_pid and await pid_of(sup, "b") == b_pid
        assert "second-secret-value" in sup.config.secrets


@pytest.mark.parametrize(
    ("bad", "refusal", "match"),
    [
        ('{"servers": {"a": ', ConfigError, r"^config error: .*config\.json: \$: invalid JSON"),
        (
            json.dumps({"servers": {"a": {"command": [sys.executable, MINI], "start": "sometimes"}}}),
            ConfigError,
            r"^config error: .*config\.json: \$\.servers\.a\.start: ",
        ),
        (
            json.dumps({"servers": {}, "admin": {"bind": "127.0.0.1:9"}}),
            ReloadRefused,
            r"^reload refused: .*config\.json: \$\.admin\.bind: changed "
            r"\(127\.0\.0\.1:8765 -> 127\.0\.0\.1:9\); a restart of mcp-supervisor is needed",
        ),
        (
            json.dumps({"servers": {}, "state_dir": "elsewhere"}),
            ReloadRefused,
            r"^reload refused: .*config\.json: \$\.state_dir: changed \(None -> .*elsewhere\); a restart",
        ),
    ],
    ids=["malformed", "invalid", "bind", "state_dir"],
)
async def test_a_refused_reload_changes_nothing(
    tmp_path: Path, bad: str, refusal: type[Exception], match: str, caplog: pytest.LogCaptureFixture
) -> None:
    file = write(tmp_path / "config.json", {"a": server()})
    config = load_config(file)
    async with Supervisor.open(config, state_dir=tmp_path / "s") as sup:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("a"))
        a_pid, epoch = await pid_of(sup, "a"), sup.router.cell.current.epoch
        file.write_text(bad)
        with pytest.raises(refusal, match=match):
            await sup.reload(trigger="test")
        assert sup.config is config
        assert await pid_of(sup, "a") == a_pid and sup.servers()["a"].state is State.STEADY
        assert sup.router.cell.current.epoch == epoch
    (line,) = [r for r in caplog.records if event_name(r) == "config reload refused"]
    assert line.fields["trigger"] == "test" and line.fields["reason"].startswith(
        ("config error", "reload refused")
    )


async def test_disabling_and_enabling_by_reload_needs_no_new_actor(tmp_path: Path) -> None:
    file = write(tmp_path / "config.json", {"a": server()})
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("a"))
            pid = await pid_of(sup, "a")
            write(file, {"a": server(enabled=False)})
            began = trio.current_time()
            await sup.reload()
            await sup.router.cell.wait_until(lambda c: c.servers["a"].state is State.DISABLED)
            assert trio.current_time() - began < AT_ONCE_S and not alive(pid)
            write(file, {"a": server()})
            await sup.reload()
            await sup.router.cell.wait_until(steady("a"))


async def test_tool_search_and_trust_rules_apply_live(tmp_path: Path) -> None:
    file = write(tmp_path / "config.json", {"a": server(trusted=True)})
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup, sup.session() as session:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("a"))
            assert (await (await session.begin_turn()).call("a_echo", {"text": "x"})).ok
            rules = {"rules": [{"permission": "mcp:a:echo", "action": "deny"}]}
            search = {"enabled": True, "max_matches": 2}
            file.write_text(
                json.dumps({"servers": {"a": server(trusted=True)}, "trust": rules, "tool_search": search})
            )
            plan = await sup.reload()
            assert plan.settings == ("trust", "tool_search")
            turn = await session.begin_turn()
        assert turn.search_enabled
        assert len(turn.search("echo add sleep")["matches"]) == 2
        denied = await turn.call("a_echo", {"text": "x"})
        assert denied.error is not None and denied.error.code == "denied", denied


async def test_trusted_applies_from_the_next_turn(tmp_path: Path) -> None:
    """A server made trusted by a reload: a turn begun before it still asks about the
    server's risky tool (and, with no approver attached, is refused); the next turn
    allows it."""
    file = write(tmp_path / "config.json", {"c": server("--tools", "2")})
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup, sup.session() as session:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("c"))
            before = await session.begin_turn()
            risky = "c_tool_1"  # "Create files for a customer.": it writes
            asked = await before.call(risky, {})
            assert asked.error is not None and "no approver is attached" in asked.error.message, asked
            write(file, {"c": server("--tools", "2", trusted=True)})
            plan = await sup.reload()
            assert plan.report()["applied_live"]["servers"] == {"c": ["trusted"]}
            still = await before.call(risky, {})
            assert still.error is not None and "no approver is attached" in still.error.message, still
            after = await session.begin_turn()
            assert (await after.call(risky, {})).ok


async def test_call_timeouts_apply_from_the_next_turn(tmp_path: Path) -> None:
    """A reload that shortens ``call_timeout_ms``: a call of a turn begun before it still
    gets the old, long timeout; a call of the next turn gets the new one."""
    file = write(tmp_path / "config.json", {"c": server(call_timeout_ms=30_000, trusted=True)})
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup, sup.session() as session:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("c"))
            before = await session.begin_turn()
            write(file, {"c": server(call_timeout_ms=100, trusted=True)})
            plan = await sup.reload()
            assert plan.report()["applied_live"]["servers"] == {"c": ["call_timeout_ms"]}
            assert (await before.call("c_sleep", {"seconds": 0.3})).ok
            after = await session.begin_turn()
            late = await after.call("c_sleep", {"seconds": 0.3})
            assert late.error is not None and late.error.code == "timeout", late
            assert "within 0.1 s" in late.error.message, late


async def test_a_reload_logs_the_warnings_of_the_file_it_applies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = write(tmp_path / "config.json", {})
    async with Supervisor.open(load_config(file), state_dir=tmp_path / "s") as sup:
        assert not [r for r in caplog.records if event_name(r) == "config warning"]
        lazy = {"command": [sys.executable, MINI]}
        write(file, {"time": lazy, "Time": lazy})
        await sup.reload()
    (record,) = [r for r in caplog.records if event_name(r) == "config warning"]
    assert record.levelname == "WARNING"
    assert record.fields["path"] == "$.servers.Time"  # type: ignore[attr-defined]
    assert record.fields["problem"].startswith("server 'Time' and server 'time' give tool ids")  # type: ignore[attr-defined]
