"""Which protocol era to speak with a server, as pure decisions with tables of cases.

Two eras share the wire. The handshake era (up to 2025-11-25) opens with
``initialize`` and keeps a session. The per-request era (2026-07-28) has neither: the
client asks ``server/discover`` what the server supports, then every request carries
the protocol version, the client's capabilities and its identity in ``_meta``
(``request_meta``), so any request can reach any server instance.

Negotiation follows the official SDK's ``mode="auto"``: probe ``server/discover``
first, and take anything that is not positive evidence of the new era (a JSON-RPC
error such as method-not-found, an answer that names no version we speak, no answer
within half of the init timeout, a connection that closed) as a handshake-era server,
which then gets ``initialize``. A connection that closed under the probe is opened again
first (a stdio server that exits on an unknown method is respawned). A per-server
``protocol`` setting pins one era; an era found before is tried first.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from actors.protocol.messages import (
    LATEST_MODERN_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    SUPPORTED_PROTOCOL_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    Caps,
    DiscoverResult,
    ErrorObject,
)


class Era(enum.Enum):
    """A protocol era, named by its newest revision."""

    HANDSHAKE = "2025-11-25"
    PER_REQUEST = "2026-07-28"

    @classmethod
    def of_version(cls, version: str) -> Era:
        """The era a negotiated revision belongs to."""
        return cls.PER_REQUEST if version in MODERN_PROTOCOL_VERSIONS else cls.HANDSHAKE


class Setting(enum.Enum):
    """A server's ``protocol`` setting: negotiate, or pin one era."""

    AUTO = "auto"
    PER_REQUEST = "2026-07-28"
    HANDSHAKE = "2025-11-25"


SETTING_VALUES: tuple[str, ...] = tuple(s.value for s in Setting)


class Opening(enum.Enum):
    """What a connection sends first."""

    PROBE = "server/discover"
    INITIALIZE = "initialize"


class ProbeOutcome(enum.Enum):
    """How ``server/discover`` ended."""

    PER_REQUEST = "answered with a version of the per-request era"
    NO_MUTUAL_VERSION = "answered, but named no version of the per-request era we speak"
    REFUSED = "answered with an error"
    TIMED_OUT = "did not answer in time"
    CLOSED = "closed the connection"


class Verdict(enum.Enum):
    """What follows a probe."""

    ADOPT = "adopt"  # speak the per-request era from now on
    FALL_BACK = "fall back"  # send initialize on the same connection
    REOPEN_AND_FALL_BACK = "reopen and fall back"  # the connection closed: open it again first
    FAIL = "fail"  # the era is pinned and the server does not speak it: the attempt failed


def opening(setting: Setting, remembered: Era | None, *, handshake_only: bool = False) -> Opening:
    """What to send first (``handshake_only``: a transport of the handshake era only,
    legacy HTTP+SSE, gets ``initialize``).

    | setting     | remembered | first          |
    |-------------|------------|----------------|
    | 2025-11-25  | any        | initialize     |
    | 2026-07-28  | any        | server/discover|
    | auto        | handshake  | initialize     |
    | auto        | other      | server/discover|
    """
    if setting is Setting.HANDSHAKE or handshake_only:
        return Opening.INITIALIZE
    if setting is Setting.PER_REQUEST:
        return Opening.PROBE
    return Opening.INITIALIZE if remembered is Era.HANDSHAKE else Opening.PROBE


def probe_wait(setting: Setting, left: float) -> float:
    """How long to wait for the ``server/discover`` answer, ``left`` seconds of the
    init timeout being left.

    | setting     | wait                                                     |
    |-------------|----------------------------------------------------------|
    | auto        | half of ``left``: the fall back to ``initialize`` gets   |
    |             | the other half. Not a fixed few seconds: a server slow   |
    |             | to start (a busy machine, a cold cache) is no verdict on |
    |             | the era, and a handshake-era server answers at once      |
    |             | (-32601): only one that ignores the probe waits it out   |
    |             | (once: its era is remembered)                            |
    | 2026-07-28  | nearly all of ``left``: nothing to fall back to, so the  |
    |             | probe is the handshake, and a slow start (a process      |
    |             | spawned on a busy machine, a hub that starts the server  |
    |             | first) is no verdict on the era; the probe ends first    |
    |             | (``PINNED_PROBE_SHARE``) so its failure names the pin    |
    """
    if setting is Setting.PER_REQUEST:
        return left * PINNED_PROBE_SHARE
    return left * AUTO_PROBE_SHARE


AUTO_PROBE_SHARE = 0.5
"""With ``auto``, the probe's share of the init time left; ``initialize`` gets the rest."""

PINNED_PROBE_SHARE = 0.9
"""A pinned probe's share of the init time left. Not all of it: the two deadlines would
expire together, the init timeout's (outer) would win, and the error would name the
timeout instead of the pin (``... is set to protocol 2026-07-28, but server/discover
did not answer in time``)."""


def after_probe(setting: Setting, outcome: ProbeOutcome) -> Verdict:
    """What follows the probe.

    | outcome                     | auto                 | 2026-07-28 pinned |
    |-----------------------------|----------------------|-------------------|
    | per-request version         | adopt                | adopt             |
    | no mutual version, refused, | fall back            | fail              |
    | timed out                   |                      |                   |
    | closed                      | reopen, fall back    | fail              |
    """
    if outcome is ProbeOutcome.PER_REQUEST:
        return Verdict.ADOPT
    if setting is Setting.PER_REQUEST:
        return Verdict.FAIL
    if outcome is ProbeOutcome.CLOSED:
        return Verdict.REOPEN_AND_FALL_BACK
    return Verdict.FALL_BACK


def remembered_after(opened: Opening, remembered: Era | None, found: Era | None) -> Era | None:
    """The era to remember after an attempt: the one found; when a remembered
    handshake era was tried straight away and nothing was found, forget it, so the
    next attempt probes again."""
    if found is not None:
        return found
    if opened is Opening.INITIALIZE and remembered is Era.HANDSHAKE:
        return None
    return remembered


def mutual_version(result: DiscoverResult) -> str | None:
    """The newest per-request revision both sides speak, or None."""
    mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in result.supported_versions]
    return mutual[-1] if mutual else None


def supported_retry(error: ErrorObject) -> str | None:
    """The per-request version to probe again at, when ``server/discover`` was refused
    with -32022 (unsupported version) and the error's ``data.supported`` names one we
    speak; else None."""
    data = error.data
    if error.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(data, dict):
        return None
    supported = data.get("supported")
    if not isinstance(supported, list):
        return None
    mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in supported]
    return mutual[-1] if mutual else None


def known_version(version: str) -> bool:
    """A revision this client speaks, in either era."""
    return version in SUPPORTED_PROTOCOL_VERSIONS or version in MODERN_PROTOCOL_VERSIONS


def request_meta(
    client_info: Mapping[str, Any], capabilities: Mapping[str, Any], version: str = LATEST_MODERN_VERSION
) -> dict[str, Any]:
    """The ``_meta`` entries every request of the per-request era carries."""
    return {
        META_PROTOCOL_VERSION: version,
        META_CLIENT_INFO: dict(client_info),
        META_CLIENT_CAPABILITIES: dict(capabilities),
    }


def restamp(
    meta: dict[str, Any] | None, capabilities: Caps, log_level: str | None = None
) -> dict[str, Any] | None:
    """A request's ``_meta`` stamp with ``capabilities`` in place of the session's own
    and ``log_level`` added (unchanged when there is no stamp: the handshake era)."""
    if meta is None or (capabilities is None and log_level is None):
        return meta
    stamp = meta if capabilities is None else {**meta, META_CLIENT_CAPABILITIES: dict(capabilities)}
    return stamp if log_level is None else {**stamp, META_LOG_LEVEL: log_level}
