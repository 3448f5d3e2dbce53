"""``plan_reload``: what a config reload restarts, starts, stops and applies live, as a table."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from actors.spec import Credentials, Scope, ServerSpec, Start
from supervisor.runtime.reload_plan import LAUNCH_KEYS, LIVE_KEYS, UNCOMPARED, ReloadRefused, plan_reload
from supervisor.settings.console import ConsoleSettings
from supervisor.settings.model import (
    AdminSettings,
    AuditSettings,
    Config,
    StoreSettings,
    ToolSearchSettings,
    TracingSettings,
    TrustRule,
    TrustSettings,
)

TOKEN = "t" * 24


def spec(name: str = "a", **changes: Any) -> ServerSpec:
    changes.setdefault("command", ("python", "server.py"))
    return ServerSpec(name=name, **changes)


def config(*specs: ServerSpec, **changes: Any) -> Config:
    return Config(source="/etc/mcp.json", servers=specs, **changes)


def test_every_server_key_is_either_a_launch_key_or_applied_live() -> None:
    """A new ServerSpec field must be classified before a reload can ignore it."""
    fields = {field.name for field in attrs.fields(ServerSpec)}
    assert fields == set(LAUNCH_KEYS) | set(LIVE_KEYS) | UNCOMPARED
    assert not set(LAUNCH_KEYS) & set(LIVE_KEYS)


LAUNCH_CHANGES = [
    ("type", {"type": "remote", "command": (), "url": "http://127.0.0.1:1/mcp"}),
    ("command", {"command": ("python", "server.py", "--flag")}),  # args are part of the argv
    ("env", {"env": {"TOKEN": "new value of a ${file:} secret"}}),
    ("cwd", {"cwd": "/tmp"}),
    ("transport", {"transport": "sse"}),
    ("headers", {"headers": {"Authorization": "Bearer other"}}),
    ("oauth", {"oauth": {"client_id": "x"}}),
]


@pytest.mark.parametrize(("key", "changes"), LAUNCH_CHANGES, ids=[k for k, _ in LAUNCH_CHANGES])
def test_a_changed_launch_key_restarts_the_server(key: str, changes: dict[str, Any]) -> None:
    new = spec(**changes)
    plan = plan_reload(config(spec(), spec("b")), config(new, spec("b")))
    assert plan.restart == (new,)
    assert (plan.start, plan.stop, plan.retune) == ((), (), ())
    assert key in plan.changes[0].keys


LIVE_CHANGES = [
    ("trusted", {"trusted": True}),
    ("call_timeout_ms", {"call_timeout_s": 5.0}),
    ("init_timeout_ms", {"init_timeout_s": 5.0}),
    ("max_call_ms", {"max_call_s": 50.0}),
    ("max_output_bytes", {"max_output_bytes": 100}),
    ("enabled", {"enabled": False}),
    ("start", {"start": Start.EAGER}),
    ("reconnect_schedule_s", {"reconnect_schedule_s": (3.0,)}),
    ("reconnect_jitter", {"reconnect_jitter": 0.3}),
]


@pytest.mark.parametrize(("key", "changes"), LIVE_CHANGES, ids=[k for k, _ in LIVE_CHANGES])
def test_a_changed_live_key_is_applied_without_a_restart(key: str, changes: dict[str, Any]) -> None:
    new = spec(**changes)
    plan = plan_reload(config(spec()), config(new))
    assert plan.retune == (new,) and plan.restart == ()
    assert plan.report()["applied_live"]["servers"] == {"a": [key]}


def test_launch_and_live_changes_together_restart_once() -> None:
    new = spec(command=("python", "other.py"), trusted=True)
    plan = plan_reload(config(spec()), config(new))
    assert plan.restart == (new,) and plan.retune == ()
    assert plan.changes[0].keys == ("command", "trusted")
    assert plan.report()["applied_live"]["servers"] == {}


def test_an_equal_server_is_untouched_even_as_a_new_object() -> None:
    plan = plan_reload(config(spec(env={"A": "1"})), config(spec(env={"A": "1"})))
    assert plan.restart == plan.retune == plan.start == () and plan.stop == ()
    assert plan.report() == {
        "restarted": [],
        "started": [],
        "stopped": [],
        "applied_live": {"servers": {}, "settings": []},
        "new_sessions": [],
    }


def test_removed_servers_stop_and_new_ones_start() -> None:
    plan = plan_reload(config(spec("a"), spec("b")), config(spec("b"), spec("c")))
    assert plan.stop == ("a",)
    assert [s.name for s in plan.start] == ["c"]


def test_a_scope_change_moves_the_server_between_shared_and_sessions() -> None:
    private = spec(scope=Scope.SESSION)
    to_sessions = plan_reload(config(spec()), config(private))
    assert to_sessions.stop == ("a",) and to_sessions.private == (private,)
    assert to_sessions.new_sessions == ("a",)
    to_shared = plan_reload(config(private), config(spec()))
    assert [s.name for s in to_shared.start] == ["a"] and to_shared.private == ()
    assert to_shared.new_sessions == ("a",)


def test_session_scoped_changes_apply_to_new_sessions() -> None:
    old = config(spec("p", scope=Scope.SESSION), spec("q", scope=Scope.SESSION))
    new = config(spec("p", scope=Scope.SESSION, trusted=True), spec("r", scope=Scope.SESSION, enabled=False))
    plan = plan_reload(old, new)
    assert plan.new_sessions == ("p", "r", "q")
    assert [s.name for s in plan.private] == ["p"]  # r is disabled
    assert plan.restart == plan.start == () and plan.stop == ()


SETTINGS = [
    ("trust", {"trust": TrustSettings(rules=(TrustRule("mcp:a:*", action="deny"),))}),
    ("trust", {"trust": TrustSettings(max_description_length=50)}),
    ("tool_search", {"tool_search": ToolSearchSettings(threshold=3)}),
    ("tracing", {"tracing": TracingSettings(arguments=True)}),
    ("admin.tokens", {"admin": AdminSettings(tokens={TOKEN: "alice"})}),
    ("console", {"console": ConsoleSettings(trace_url="http://127.0.0.1:16686/trace/{trace_id}")}),
]


@pytest.mark.parametrize(("name", "changes"), SETTINGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SETTINGS)])
def test_settings_are_applied_live(name: str, changes: dict[str, Any]) -> None:
    plan = plan_reload(config(spec()), config(spec(), **changes))
    assert plan.settings == (name,)
    assert plan.restart == plan.retune == ()


@pytest.mark.parametrize(
    ("key", "changes"),
    [
        ("$.admin.bind", {"admin": AdminSettings(bind="127.0.0.1:9999")}),
        ("$.state_dir", {"state_dir": "/var/lib/elsewhere"}),
        ("$.audit.keep_days", {"audit": AuditSettings(keep_days=30)}),
        ("$.store.url", {"store": StoreSettings(url="postgresql://mcp:hunter2@db/mcp")}),
    ],
)
def test_bind_and_state_dir_cannot_change_while_running(key: str, changes: dict[str, Any]) -> None:
    with pytest.raises(ReloadRefused) as refused:
        plan_reload(config(spec()), config(spec("b"), **changes))
    assert refused.value.key == key
    text = str(refused.value)
    assert text.startswith(f"reload refused: /etc/mcp.json: {key}: changed (")
    assert "a restart of mcp-supervisor is needed" in text
    assert "hunter2" not in text


def test_removing_every_token_of_a_non_loopback_admin_api_is_refused() -> None:
    bound = AdminSettings(bind="0.0.0.0:8765", tokens={TOKEN: "alice"})
    with pytest.raises(ReloadRefused) as refused:
        plan_reload(config(admin=bound), config(admin=AdminSettings(bind="0.0.0.0:8765")))
    assert refused.value.key == "$.admin.tokens"
    loopback = AdminSettings(tokens={TOKEN: "alice"})
    assert plan_reload(config(admin=loopback), config()).settings == ("admin.tokens",)


def test_the_log_summary_names_what_changed_and_no_value() -> None:
    old = config(spec("a"), spec("b"), spec("gone"))
    new = config(spec("a", env={"SECRET": "hunter2-hunter2"}), spec("b", trusted=True), spec("new"))
    summary = plan_reload(old, new).summary()
    assert summary == {
        "restarted": "a",
        "started": "new",
        "stopped": "gone",
        "new_sessions": "-",
        "live": "b",
    }
    assert "hunter2" not in repr(summary)


def test_a_per_user_server_added_removed_or_changed_is_refused_naming_it() -> None:
    """People's connections and pending sign-ins are not carried over: a restart applies it."""
    mine = spec("gh", type="remote", command=(), url="https://gh.example/mcp", oauth={},
                credentials=Credentials.PER_USER)  # fmt: skip
    for old, new, what in [
        (config(spec()), config(spec(), mine), "added"),
        (config(spec(), mine), config(spec()), "removed"),
        (config(mine), config(attrs.evolve(mine, trusted=True)), "changed"),
        (config(mine), config(attrs.evolve(mine, credentials=Credentials.SHARED)), "changed"),
    ]:
        with pytest.raises(ReloadRefused) as refused:
            plan_reload(old, new)
        assert refused.value.key == "$.servers.gh" and f'a "per_user" server {what}' in str(refused.value)
    assert plan_reload(config(mine, spec()), config(mine, spec(trusted=True))).retune == (spec(trusted=True),)
