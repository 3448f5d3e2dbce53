"""Network addresses: the project's one loopback check and its one ``HOST:PORT`` parser.

:func:`is_loopback_host` answers "is this loopback?" wherever it is asked: for
``serve --bind`` (a non-loopback bind needs ``--allow-non-loopback`` and tokens), for
the admin API's own bind (then the DNS-rebinding guard is on), for a peer's address
(without tokens only loopback clients are served), and for the host of a request's
``Host``, absolute-form target and ``Origin`` (``web/auth.py`` parses those strictly
first). :func:`parse_bind` reads every ``HOST:PORT``: ``admin.bind`` in the config,
``--bind``, and the address ``server.serve`` is given.

Strict on purpose, because a wrong "yes" switches a guard off or lets a client in:
only ``localhost`` (in any case: host names are case-insensitive, and the resolver
maps ``LOCALHOST`` to 127.0.0.1 too), an IPv4 address in 127.0.0.0/8 written as four
decimal numbers, and the IPv6 loopback (bare or in brackets) count. Other spellings
the resolver would also read as loopback (``127.1``, ``0x7f.0.0.1``, ``2130706433``,
``127.000.0.1``) do not: ``ipaddress`` refuses them, and a non-loopback answer only
ever asks for more (the flag and tokens), never less.
"""

from __future__ import annotations

import functools
import ipaddress
import re

import attrs

MAX_PORT = 65535
# An IPv6 literal in brackets, or anything without a colon, bracket or space; a port of
# 1-5 digits, checked against MAX_PORT.
_BIND = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]\s]+):(?P<port>[0-9]{1,5})\Z")


@attrs.frozen(slots=True)
class Bind:
    """A parsed ``HOST:PORT``; ``host`` as written (an IPv6 literal keeps its brackets)."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """Whether the host is loopback (see the module docstring)."""
        return is_loopback_host(self.host)


def parse_bind(text: str) -> Bind | None:
    """``HOST:PORT`` with an IPv6 host in brackets and a port of 0-65535, or None."""
    match = _BIND.match(text)
    if match is None or int(match["port"]) > MAX_PORT:
        return None
    return Bind(match["host"], int(match["port"]))


def bind_is_loopback(text: str) -> bool:
    """Whether ``text`` is a ``HOST:PORT`` on loopback; one that does not parse is not."""
    bind = parse_bind(text)
    return bind is not None and bind.loopback


@functools.lru_cache(maxsize=256)
def is_loopback_host(host: str) -> bool:
    """A host name or IP literal (IPv6 with or without brackets) that is loopback
    (remembered: every request asks it of its ``Host`` and its peer's address)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if bare.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False
