"""How a resource URI is shown to a host: as it is, or qualified with its server.

A resource is addressed by ``(server, uri)``. A URI that only one server publishes is
shown as it is. A URI that two or more servers publish (two filesystem servers both
serving ``file:///projects/notes.md``) is shown, for every one of them, in the
qualified form ``mcp-supervisor://<server>/<uri>``, the server's name percent-encoded,
the URI kept verbatim after the first ``/``. The form is reversible (``unqualify``), a
valid URI, and reading it reaches that server. A published URI that itself begins
with the qualified form's prefix is always shown qualified, so a shown URI never reads
two ways. Resource templates follow the same rule on their ``uriTemplate``.

The rule depends only on the set of published pairs, never on the order in which
servers listed, so a shown URI is stable across restarts.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote, unquote

QUALIFIED_PREFIX = "mcp-supervisor://"


def qualify(server: str, uri: str) -> str:
    """The qualified form of ``uri`` published by ``server``."""
    return f"{QUALIFIED_PREFIX}{quote(server, safe='')}/{uri}"


def unqualify(shown: str) -> tuple[str, str] | None:
    """``(server, uri)`` of a qualified form; None for any other string."""
    if not shown.startswith(QUALIFIED_PREFIX):
        return None
    server, slash, uri = shown[len(QUALIFIED_PREFIX) :].partition("/")
    if not slash or not server or not uri:
        return None
    return unquote(server), uri


def shown_uri(server: str, uri: str, publishers: int) -> str:
    """How ``server``'s ``uri`` is shown when ``publishers`` servers publish it."""
    return qualify(server, uri) if publishers > 1 or uri.startswith(QUALIFIED_PREFIX) else uri


def shown_uris(published: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """How each published ``(server, uri)`` pair is shown (see the module docstring)."""
    pairs = list(dict.fromkeys(published))
    publishers: dict[str, int] = {}
    for _server, uri in pairs:
        publishers[uri] = publishers.get(uri, 0) + 1
    return {(server, uri): shown_uri(server, uri, publishers[uri]) for server, uri in pairs}
