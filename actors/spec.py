"""What a connection actor needs to know about its server (pure data, no I/O).

The supervisor's config loader builds these from the user's file; tests build them by
hand. Times are in seconds here (the config file speaks milliseconds).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from actors.tls import ClientTls

DEFAULT_RECONNECT_SCHEDULE_S: tuple[float, ...] = (1.0, 2.0, 5.0, 15.0, 60.0)
DEFAULT_RECONNECT_JITTER = 0.1
DEFAULT_INIT_TIMEOUT_S = 60.0
DEFAULT_CALL_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 16_384


class Start(enum.Enum):
    """When a server is first connected."""

    LAZY = "lazy"
    EAGER = "eager"


class Scope(enum.Enum):
    """Who shares a connection: everyone, or one session."""

    SHARED = "shared"
    SESSION = "session"


class Credentials(enum.Enum):
    """Whose upstream identity a remote server's calls carry: one for everyone, or
    each person's own (one connection and one OAuth record per server and person)."""

    SHARED = "shared"
    PER_USER = "per_user"


def redact(text: str, secrets: Iterable[str], mask: str = "***") -> str:
    """Mask every secret in ``text``, longest first, also in its repr()-escaped form.

    Used for reprs, ``check`` output and stderr buffers: a secret must never reach a log.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, mask)
        escaped = repr(secret)[1:-1]
        if escaped != secret:
            text = text.replace(escaped, mask)
    return text


@attrs.frozen(slots=True, repr=False)
class ServerSpec:
    """One configured MCP server.

    ``command`` is the full argv (command plus args). ``env`` is added to the
    supervisor's environment. ``secrets`` holds the values that were expanded from
    ``${env:…}`` / ``${file:…}`` (and literal credentials such as ``Authorization``
    headers) so logs and stderr buffers can redact them; ``repr()`` masks them too.
    """

    name: str
    type: str = "local"
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    url: str | None = None
    # type "remote": "auto" (Streamable HTTP, falling back to legacy HTTP+SSE when the
    # server answers initialize the old way), "streamable-http" or "sse".
    transport: str = "auto"
    # The protocol era: "auto" (probe server/discover, fall back to initialize),
    # "2026-07-28" (the per-request era only) or "2025-11-25" (initialize only).
    protocol: str = "auto"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    enabled: bool = True
    trusted: bool = False
    scope: Scope = Scope.SHARED
    credentials: Credentials = Credentials.SHARED
    start: Start = Start.LAZY
    init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    max_call_s: float | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    reconnect_schedule_s: tuple[float, ...] = DEFAULT_RECONNECT_SCHEDULE_S
    # Each delay moved by up to this fraction of itself, either way, at random, so that
    # servers that failed together do not retry together (0: exactly on the schedule).
    reconnect_jitter: float = DEFAULT_RECONNECT_JITTER
    # Stay steady this long and the schedule starts again from its first delay.
    reset_after_s: float = 60.0
    # How long a hung server has to answer a liveness ping after a call timed out.
    ping_timeout_s: float = 10.0
    # Teardown: wait this long after closing stdin, and again after SIGTERM.
    shutdown_grace_s: float = 2.0
    secrets: tuple[str, ...] = ()
    # type "websocket": the server's name on the remote bridge (`mcp:session:open`).
    server_name: str | None = None
    # type "remote": OAuth client settings, kept as written (deep-frozen) for the auth step.
    oauth: Mapping[str, Any] | None = None
    # type "remote" over https: our client certificate and the CA we trust (mutual TLS),
    # for the MCP endpoint and its OAuth endpoints alike (``actors/tls.py``).
    tls: ClientTls | None = None
    # The least severe log message the server should send (``logging/setLevel``, sent
    # when the server declares ``logging``): an RFC 5424 level, "debug" … "emergency".
    log_level: str = "warning"
    # At most this many requests in flight to one instance of the server (None: no
    # bound); one more is answered ``busy`` at once (``actors/connection/calls.py``).
    concurrency: int | None = None
    # Exported raw through the supervisor's WebSocket bridge (``/v1/bridge``): a client
    # session there gets a process of its own, with no trust rules or validation.
    bridge: bool = False
    # Spare processes kept spawned and idle before ``initialize`` (a ``scope: session``
    # or ``bridge`` local server): a new session adopts one instead of waiting for a
    # spawn (``supervisor/runtime/warm_pool.py``). Each spare serves one session only.
    warm: int = 0

    def __repr__(self) -> str:
        # Specs end up in logs and tracebacks: show every field but never a secret.
        parts = ", ".join(
            f"{field.name}={getattr(self, field.name)!r}"
            for field in attrs.fields(ServerSpec)
            if field.name != "secrets"
        )
        return redact(f"ServerSpec({parts}, secrets=<{len(self.secrets)} hidden>)", self.secrets)

    @property
    def max_call_timeout_s(self) -> float:
        """Absolute cap on one call, progress or not (default 10 x the call timeout)."""
        return self.max_call_s if self.max_call_s is not None else 10 * self.call_timeout_s
