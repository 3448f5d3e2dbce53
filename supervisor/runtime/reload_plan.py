"""What a config reload changes: a pure function from (running config, new config) to a plan.

``plan_reload`` decides everything a reload does, and ``Supervisor.reload`` only
carries it out, so the rules are tested as a table (``tests/runtime/test_reload_plan.py``)
without a running supervisor:

- A shared server restarts only when a *launch key* changed (``LAUNCH_KEYS``: how it
  is reached). Values are compared after expansion, so a changed ``${file:…}`` or
  ``${env:…}`` restarts it, and an unchanged one does not.
- Every other key of a server (``LIVE_KEYS``: ``trusted``, timeouts,
  ``max_output_bytes``, ``enabled``, ``start``, the reconnect schedule) is applied to
  the running server without a restart.
- A server no longer in the file stops; a new one starts. ``scope: session`` servers
  are started by each session: a change to them applies to sessions opened after it.
- ``trust``, ``tool_search``, ``bridge``, ``tracing`` and ``limits`` (calls made after
  it: a rate limit's buckets keep their tokens), ``exposure`` (turns begun after it, in
  a new epoch), ``admin.tokens`` and ``signin`` (the guard's next request; its kept
  key sets are dropped only when the section changed) and ``console`` (the console's
  next page) apply live.
- ``admin.bind``, ``state_dir``, ``store.url`` (the store is opened once),
  ``cluster`` (a replica's identity, keys and heartbeat) and ``audit.keep_days`` (the
  retention task is started with the supervisor) cannot change while running: the
  reload is refused, naming the key (``ReloadRefused``), and nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from actors.spec import Credentials, Scope, ServerSpec
from supervisor.settings.model import Config
from supervisor.settings.net import bind_is_loopback
from supervisor.store.postgres import display_url

__all__ = ["LAUNCH_KEYS", "LIVE_KEYS", "ReloadPlan", "ReloadRefused", "ServerChange", "plan_reload"]
__all__ += ["NO_FILE", "shared_specs"]

LAUNCH_KEYS: Mapping[str, str] = {
    # ServerSpec field → the config key a person reads in the report
    "type": "type",
    "command": "command",  # command plus args, expanded
    "env": "env",
    "cwd": "cwd",
    "url": "url",
    "headers": "headers",  # ``token`` lands here too
    "oauth": "oauth",
    "tls": "tls",  # a new certificate needs a new connection (and OAuth client)
    "transport": "transport",
    "protocol": "protocol",  # the era is settled when a connection starts
    "scope": "scope",
    "credentials": "credentials",  # whose identity: a per_user change is refused (a restart)
    "server_name": "server_name",  # a websocket bridge's server: where it connects
}
"""A change to one of these restarts the server (a new process or connection)."""

LIVE_KEYS: Mapping[str, str] = {
    "trusted": "trusted",
    "init_timeout_s": "init_timeout_ms",
    "call_timeout_s": "call_timeout_ms",
    "max_call_s": "max_call_ms",
    "max_output_bytes": "max_output_bytes",
    "enabled": "enabled",
    "start": "start",
    "reconnect_schedule_s": "reconnect_schedule_s",
    "reconnect_jitter": "reconnect_jitter",
    "reset_after_s": "reset_after_s",
    "ping_timeout_s": "ping_timeout_s",
    "log_level": "log_level",
    "shutdown_grace_s": "shutdown_grace_s",
    "concurrency": "concurrency",
    "bridge": "bridge",  # read by the bridge at each open
    "warm": "warm",  # the spare pool restarts that server's spares (``warm_pool``)
}
"""A change to one of these is applied to the running server (calls sent after it)."""

UNCOMPARED = frozenset({"name", "secrets"})
"""The name is the server's identity; secrets follow from the launch keys' values."""


class ReloadRefused(Exception):
    """The new config cannot be applied while running; ``str()`` is the line to show.

    ``key`` is the config's JSON path of what changed (``$.admin.bind``); ``code`` the
    admin API's error code."""

    def __init__(self, file: str, key: str, problem: str, code: str = "restart_needed") -> None:
        super().__init__(f"reload refused: {file}: {key}: {problem}")
        self.file = file
        self.key = key
        self.problem = problem
        self.code = code


NO_FILE = ReloadRefused(
    "(no config file)",
    "$",
    "the supervisor was started without a config file, so there is none to read again; "
    "start it with --config (or $MCP_SUPERVISOR_CONFIG), or pass the new config to reload()",
    code="no_config_file",
)


@attrs.frozen(slots=True)
class ServerChange:
    """One server's changed keys, as the config file names them."""

    name: str
    keys: tuple[str, ...]


@attrs.frozen(slots=True)
class ReloadPlan:
    """What a reload does. Servers are the shared ones unless said otherwise."""

    restart: tuple[ServerSpec, ...] = ()
    """Launch keys changed: stopped, then started with these specs."""
    start: tuple[ServerSpec, ...] = ()
    stop: tuple[str, ...] = ()
    retune: tuple[ServerSpec, ...] = ()
    """Only live keys changed: the running server takes these specs."""
    changes: tuple[ServerChange, ...] = ()
    """What changed of each restarted or retuned server (for the report)."""
    private: tuple[ServerSpec, ...] = ()
    """The enabled ``scope: session`` servers every new session starts."""
    new_sessions: tuple[str, ...] = ()
    """``scope: session`` servers added, changed or removed (new sessions see it)."""
    settings: tuple[str, ...] = ()
    """Changed settings applied live: ``trust``, ``tool_search``, ``bridge``, ``tracing``,
    ``limits``, ``exposure``, ``admin.tokens``, ``signin``, ``console``."""

    def report(self) -> dict[str, Any]:
        """The reply of a reload (admin API, CLI ``--json``): names and keys, no values."""
        live = {c.name: list(c.keys) for c in self.changes if c.name in {s.name for s in self.retune}}
        return {
            "restarted": [spec.name for spec in self.restart],
            "started": [spec.name for spec in self.start],
            "stopped": list(self.stop),
            "applied_live": {"servers": live, "settings": list(self.settings)},
            "new_sessions": list(self.new_sessions),
        }

    def summary(self) -> dict[str, str]:
        """The reload's log fields (names only: no value of the config is logged)."""
        report = self.report()
        live = report["applied_live"]
        fields = {key: ",".join(report[key]) for key in ("restarted", "started", "stopped", "new_sessions")}
        fields["live"] = ",".join([*live["servers"], *live["settings"]])
        return {key: value or "-" for key, value in fields.items()}


def _store_named(config: Config) -> str:
    return "sqlite" if config.store.url is None else display_url(config.store.url)


def plan_reload(old: Config, new: Config) -> ReloadPlan:
    """The plan that turns a supervisor running ``old`` into one running ``new``.

    Raises ReloadRefused: ``admin.bind``, ``state_dir``, ``store.url``, ``cluster`` or ``audit``
    changed (a restart is needed), or the tokens were all removed while the admin API listens
    beyond loopback.
    """
    file = new.source or old.source or "(no config file)"
    _refuse_fixed(old, new, file)
    old_shared = {s.name: s for s in old.servers if s.scope is Scope.SHARED and s.name not in _per_user(old)}
    new_shared = {s.name: s for s in new.servers if s.scope is Scope.SHARED and s.name not in _per_user(new)}
    restart, retune, changes = [], [], []
    for name, spec in new_shared.items():
        before = old_shared.get(name)
        if before is None:
            continue
        launch, live = _diff(before, spec)
        if launch:
            restart.append(spec)
        elif live:
            retune.append(spec)
        if launch or live:
            changes.append(ServerChange(name, (*launch, *live)))
    old_private = {s.name: s for s in old.servers if s.scope is Scope.SESSION}
    new_private = {s.name: s for s in new.servers if s.scope is Scope.SESSION}
    private_changed = [n for n, s in new_private.items() if _differs(old_private.get(n), s)]
    private_changed += [n for n in old_private if n not in new_private]
    return ReloadPlan(
        restart=tuple(restart),
        start=tuple(s for n, s in new_shared.items() if n not in old_shared),
        stop=tuple(n for n in old_shared if n not in new_shared),
        retune=tuple(retune),
        changes=tuple(changes),
        private=tuple(s for s in new_private.values() if s.enabled),
        new_sessions=tuple(private_changed),
        settings=_settings(old, new),
    )


def _refuse_fixed(old: Config, new: Config, file: str) -> None:
    restart = "a restart of mcp-supervisor is needed to apply it; the running config is unchanged"
    if old.admin.bind != new.admin.bind:
        raise ReloadRefused(
            file, "$.admin.bind", f"changed ({old.admin.bind} -> {new.admin.bind}); {restart}"
        )
    if old.state_dir != new.state_dir:
        raise ReloadRefused(file, "$.state_dir", f"changed ({old.state_dir} -> {new.state_dir}); {restart}")
    if old.store.url != new.store.url:  # the URL holds a password: named, never shown
        moved = f"changed ({_store_named(old)} -> {_store_named(new)}); {restart}"
        raise ReloadRefused(file, "$.store.url", moved)
    if old.cluster != new.cluster:  # the replica's identity, keys and heartbeat are fixed at start
        changed = ", ".join(_cluster_keys(old, new))
        raise ReloadRefused(file, "$.cluster", f"changed ({changed}); {restart}")
    if old.audit != new.audit:
        was, now = old.audit.keep_days, new.audit.keep_days
        raise ReloadRefused(file, "$.audit.keep_days", f"changed ({was} -> {now}); {restart}")
    old_own, new_own = _per_user(old), _per_user(new)
    for name in sorted(old_own.keys() | new_own.keys()):
        if old_own.get(name) != new_own.get(name):  # people's connections and sign-ins are not moved
            before, after = {s.name for s in old.servers}, {s.name for s in new.servers}
            what = "added" if name not in before else "removed" if name not in after else "changed"
            raise ReloadRefused(file, f"$.servers.{name}", f'a "per_user" server {what}; {restart}')
    if old.admin.tokens and not new.admin.tokens and not bind_is_loopback(new.admin.bind):
        raise ReloadRefused(
            file,
            "$.admin.tokens",
            f"the admin API listens on a non-loopback address ({new.admin.bind}), which needs "
            "admin tokens; keep at least one (the running config is unchanged)",
        )


def _cluster_keys(old: Config, new: Config) -> list[str]:
    """The ``cluster`` keys that differ, by name (never a key's value)."""
    if old.cluster is None or new.cluster is None:
        return ["added" if old.cluster is None else "removed"]
    return [
        f.name
        for f in attrs.fields(type(old.cluster))
        if getattr(old.cluster, f.name) != getattr(new.cluster, f.name)
    ]


def _per_user(config: Config) -> dict[str, ServerSpec]:
    """The ``per_user`` servers (a server that becomes one, or stops being one, counts)."""
    return {spec.name: spec for spec in config.servers if spec.credentials is Credentials.PER_USER}


def _diff(old: ServerSpec, new: ServerSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(changed launch keys, changed live keys) of one server, as config keys."""
    launch = tuple(key for field, key in LAUNCH_KEYS.items() if _value(old, field) != _value(new, field))
    live = tuple(key for field, key in LIVE_KEYS.items() if _value(old, field) != _value(new, field))
    return launch, live


def _differs(old: ServerSpec | None, new: ServerSpec) -> bool:
    return old is None or any(_diff(old, new))


def _value(spec: ServerSpec, field: str) -> Any:
    value = getattr(spec, field)
    return dict(value) if isinstance(value, Mapping) else value


def _settings(old: Config, new: Config) -> tuple[str, ...]:
    changed = []
    if old.trust != new.trust:
        changed.append("trust")
    if old.tool_search != new.tool_search:
        changed.append("tool_search")
    if old.bridge != new.bridge:
        changed.append("bridge")
    if old.tracing != new.tracing:
        changed.append("tracing")
    if old.limits != new.limits:
        changed.append("limits")
    if old.exposure != new.exposure:
        changed.append("exposure")
    if dict(old.admin.tokens) != dict(new.admin.tokens):
        changed.append("admin.tokens")
    if old.signin != new.signin:
        changed.append("signin")
    if old.console != new.console:
        changed.append("console")
    return tuple(changed)


def shared_specs(config: Config) -> tuple[ServerSpec, ...]:
    """The shared servers of ``config``, in its order."""
    return tuple(spec for spec in config.servers if spec.scope is Scope.SHARED)
