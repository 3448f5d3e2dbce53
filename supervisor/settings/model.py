"""The whole configuration as frozen data (built by the loader, read by everyone else).

Plain attrs classes with no logic in ``__init__``: validation and defaults-from-file
live in the loader, so tests and embedders can build these by hand. Times in the file
are milliseconds; here they are seconds, like everywhere else in the code.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

import attrs

from actors.router.exposure import ServerRule
from actors.spec import ServerSpec

from .console import ConsoleSettings
from .signin import SigninSettings

__all__ = [
    "AdminSettings",
    "BridgeSettings",
    "Config",
    "ConfigWarning",
    "ExposureRule",
    "GatewaySettings",
    "RateLimit",
    "Role",
    "ServerSpec",
    "TokenGrant",
    "ToolSearchSettings",
    "TracingSettings",
    "TrustAction",
    "TrustRule",
    "TrustSettings",
]

TrustAction = Literal["allow", "ask", "deny"]

DEFAULT_ADMIN_BIND = "127.0.0.1:8765"


@attrs.frozen(slots=True)
class ToolSearchSettings:
    """When turns list only ``tool_search`` instead of every tool.

    ``enabled="auto"`` switches search on once a session's tool count (its MCP tools
    plus the host's own declared ``host_tools``) exceeds ``threshold``. Then a turn
    lists the host's pinned tools, the tools this session has activated, and
    ``tool_search``, whose matches (at most ``max_matches``) are activated for the rest
    of the session, this turn included.
    """

    enabled: Literal["auto"] | bool = "auto"
    threshold: int = 20
    max_matches: int = 10


@attrs.frozen(slots=True)
class GatewaySettings:
    """The MCP gateway (``/mcp`` and ``mcp-supervisor stdio``).

    ``prefix``: tool and prompt names are ``<server>_<name>``; false (a plain proxy of
    one backend, accepted only with exactly one server) shows the backend's own names.
    ``max_message_bytes``: one client message larger than this gets an error of its own
    (the session lives on). ``session_idle_s``: a handshake-era session (and a tenant's
    new-era state) idle that long ends, never while a call is in flight.
    ``max_sessions_per_tenant``: the session over it is refused with a clear error.
    """

    prefix: bool = True
    max_message_bytes: int = 4 * 1024 * 1024
    session_idle_s: float = 1800.0
    max_sessions_per_tenant: int = 256


@attrs.frozen(slots=True)
class BridgeSettings:
    """The WebSocket bridge (``/v1/bridge``): only servers with ``bridge: true`` are exported.

    ``allowed_origins``: browser origins (``https://app.example``) allowed besides the
    loopback ones. ``max_sessions_per_tenant`` and ``max_processes`` (every tenant's
    bridged processes together) refuse the open over them. ``heartbeat_s``: how often
    the hub pings each socket; ``idle_s``: a socket with no frame either way that long
    is closed. ``max_message_bytes`` (None: the gateway's): a larger frame is answered
    ``mcp:error`` and the socket lives on.
    """

    allowed_origins: tuple[str, ...] = ()
    max_sessions_per_tenant: int = 32
    max_processes: int = 256
    heartbeat_s: float = 20.0
    idle_s: float = 600.0
    max_message_bytes: int | None = None


@attrs.frozen(slots=True)
class SecretsAtRest:
    """The keys that seal the store's OAuth records (``supervisor/store/sealing.py``):
    the first seals, every one opens (a rotation lists the new key first, the old
    second). None configured: a key generated in the state directory is used."""

    keys: tuple[bytes, ...] = attrs.field(default=(), repr=False)


@attrs.frozen(slots=True)
class StoreSettings:
    """Where the store is: ``url``, a PostgreSQL database (``postgresql://``), else
    (None) SQLite in the state directory. ``secrets``: the URL's password, to redact."""

    url: str | None = attrs.field(default=None, repr=False)
    secrets: tuple[str, ...] = attrs.field(default=(), repr=False)


@attrs.frozen(slots=True)
class ClusterSettings:
    """This process as one replica of several sharing a PostgreSQL store (``cluster.py``).

    ``replica``: its id, the prefix of the session ids it mints (what the load balancer
    routes on). ``address``: the base URL other replicas reach it at (None: the address
    it is bound to). ``keys``: the shared keys that authenticate session ids, request
    states and forwarded requests; the first signs, every one is accepted (a rotation
    lists the new key first). ``heartbeat_s`` / ``ttl_s``: how often its heartbeat row
    is renewed and how long it counts after that. ``drain_s``: how long a SIGTERM waits
    for its calls before it hands its sessions over; ``drain_notice_s``: see below."""

    replica: str
    keys: tuple[bytes, ...] = attrs.field(repr=False)
    address: str | None = None
    heartbeat_s: float = 0.25
    ttl_s: float = 1.0
    drain_s: float = 30.0
    drain_notice_s: float = 0.25
    """How long a draining replica still accepts connections after its row and its
    readiness say draining (a health-checking balancer's interval times its fall count)."""


@attrs.frozen(slots=True)
class AuditSettings:
    """How long the audit keeps its rows: ``keep_days`` (None, the default: all of
    them), else rows older than that are purged at start and hourly after."""

    keep_days: float | None = None


@attrs.frozen(slots=True)
class TracingSettings:
    """What a traced call's span may carry besides its metadata, each off by default:
    the arguments a model sent and the result it got may hold secrets or personal data,
    and the tenant names a customer, while a trace backend is often read more widely
    than the audit. ``arguments`` and ``results``: ``gen_ai.tool.call.arguments`` and
    ``.result`` (JSON text, redacted as log lines are, cut to the server's
    ``max_output_bytes``); ``identity``: ``mcp_supervisor.tenant``, ``.session`` and ``.person``."""

    arguments: bool = False
    results: bool = False
    identity: bool = False


@attrs.frozen(slots=True)
class ExposureRule:
    """One ``exposure`` entry: for the tenants ``tenant`` matches (a glob), what
    ``rule`` lets its servers show (``actors/router/exposure.py``). A server's
    ``expose`` is one of these with ``tenant`` ``*``."""

    tenant: str = "*"
    rule: ServerRule = attrs.field(factory=ServerRule)


@attrs.frozen(slots=True)
class RateLimit:
    """One ``limits`` entry: a token bucket (``per_s``, ``burst``) for each combination
    of the values of the fields it names among ``tenant``, ``server`` and ``tool``
    (globs; None: not named), over the calls whose values they match
    (``supervisor/calls/rate_limits.py``)."""

    per_s: float
    burst: int
    tenant: str | None = None
    server: str | None = None
    tool: str | None = None

    @property
    def selector(self) -> tuple[str | None, str | None, str | None]:
        """What it covers, as written: a reload keeps the buckets of an entry whose
        selector it keeps."""
        return (self.tenant, self.server, self.tool)


@attrs.frozen(slots=True)
class TrustRule:
    """``permission`` globs ``mcp:<server>:<tool>``, ``pattern`` the call's candidates
    (``actors/router/subjects.py``)."""

    permission: str
    pattern: str = "*"
    action: TrustAction = "ask"


@attrs.frozen(slots=True)
class TrustSettings:
    """Ordered trust rules (the last match wins) and the limits around approvals."""

    rules: tuple[TrustRule, ...] = ()
    max_description_length: int = 200
    approval_timeout_s: float = 120.0
    operator_only: tuple[str, ...] = ()
    """Permission globs whose ``ask`` is never put to the calling client through
    elicitation (``supervisor/sessions/trust_prompts.py``): the approver or operator decides."""


class Role(enum.StrEnum):
    """What an admin API token may do (``supervisor.web.roles`` has the table)."""

    OPERATOR = "operator"
    TENANT = "tenant"
    PEER = "peer"


DEFAULT_TENANT = "default"


@attrs.frozen(slots=True)
class TokenGrant:
    """Who a bearer token speaks for: a tenant, in a role."""

    tenant: str = DEFAULT_TENANT
    role: Role = Role.TENANT


def _grants(tokens: Mapping[str, TokenGrant | str]) -> Mapping[str, TokenGrant]:
    """A plain tenant name means that tenant in the ``tenant`` role (the config's
    ``{"<token>": "alice"}`` form, and what embedders wrote before roles existed)."""
    return MappingProxyType(
        {token: g if isinstance(g, TokenGrant) else TokenGrant(g) for token, g in tokens.items()}
    )


@attrs.frozen(slots=True)
class AdminSettings:
    """Where the admin API listens and which bearer token grants what.

    ``tokens`` maps token -> ``TokenGrant`` (a bare tenant name is accepted and means
    the ``tenant`` role); it is kept out of ``repr()`` because its keys are credentials.
    """

    bind: str = DEFAULT_ADMIN_BIND
    tokens: Mapping[str, TokenGrant] = attrs.field(factory=dict, converter=_grants, repr=False)


@attrs.frozen(slots=True)
class ConfigWarning:
    """Something the file may say but probably should not; ``str()`` is the line to show.

    ``check`` prints these on stderr and ``Supervisor.open`` logs them; the config is
    used all the same.
    """

    file: str
    json_path: str
    problem: str

    def __str__(self) -> str:
        return f"config warning: {self.file}: {self.json_path}: {self.problem}"


@attrs.frozen(slots=True)
class Config:
    """Everything one supervisor run was configured with.

    ``source`` is the file it was read from (None when no file was found or given);
    ``servers`` keep the file's order, which is also the start order; ``warnings``
    are what the loader would have the operator look at.
    """

    source: str | None = None
    servers: tuple[ServerSpec, ...] = ()
    tool_search: ToolSearchSettings = ToolSearchSettings()
    trust: TrustSettings = TrustSettings()
    admin: AdminSettings = AdminSettings()
    gateway: GatewaySettings = GatewaySettings()
    bridge: BridgeSettings = BridgeSettings()
    tracing: TracingSettings = TracingSettings()
    audit: AuditSettings = AuditSettings()
    exposure: tuple[ExposureRule, ...] = ()
    limits: tuple[RateLimit, ...] = ()
    state_dir: str | None = None
    secrets_at_rest: SecretsAtRest = SecretsAtRest()
    store: StoreSettings = StoreSettings()
    signin: SigninSettings | None = None
    cluster: ClusterSettings | None = None
    console: ConsoleSettings = attrs.field(factory=ConsoleSettings)
    warnings: tuple[ConfigWarning, ...] = ()

    def server(self, name: str) -> ServerSpec:
        """The server called ``name``; KeyError naming the known servers otherwise."""
        for spec in self.servers:
            if spec.name == name:
                return spec
        known = ", ".join(spec.name for spec in self.servers) or "none"
        raise KeyError(f"no server named {name!r} in the config (known: {known})")

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every credential this config holds (server secrets and admin tokens), for redaction."""
        found: dict[str, None] = {}
        for spec in self.servers:
            found.update(dict.fromkeys(spec.secrets))
        found.update(dict.fromkeys(self.admin.tokens))
        if self.signin is not None:
            found.update(dict.fromkeys(self.signin.secrets))
        found.update(dict.fromkeys(self.store.secrets))
        if self.cluster is not None:  # the shared keys, as the file or environment gives them
            found.update(dict.fromkeys(base64.b64encode(key).decode() for key in self.cluster.keys))
        return tuple(found)
