"""What a server map may say but should not: config warnings, not errors.

Credentials written into a URL, and two server names that tool ids cannot tell apart
well: ids are ``<server>_<tool>`` with the server part sanitized (``naming.py``), so
``my-server`` and ``my_server`` give the same ids (both servers' tools then get
hashed ones), and ``time`` and ``Time`` give ids that differ only in letter case.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from actors.router.naming import sanitize_server
from actors.spec import ServerSpec

from .values import child

__all__ = ["server_warnings"]


def server_warnings(servers: tuple[ServerSpec, ...], path: str) -> list[tuple[str, str]]:
    """(json path, problem) for each thing the servers at ``path`` may say but should not."""
    found = []
    first: dict[str, str] = {}  # folded id prefix → the first server that has it
    for spec in servers:
        if spec.url is not None and "@" in urlsplit(spec.url).netloc:
            found.append(
                (
                    child(child(path, spec.name), "url"),
                    "the URL carries credentials (user:password@); URLs are shown and logged "
                    "in many places, so move them to 'headers' (e.g. Authorization) or 'token'",
                )
            )
        other = first.setdefault(sanitize_server(spec.name).casefold(), spec.name)
        if other != spec.name:
            found.append((child(path, spec.name), _alike(spec.name, other)))
    return found


def _alike(name: str, other: str) -> str:
    mine, theirs = sanitize_server(name), sanitize_server(other)
    if mine == theirs:
        return (
            f"server {name!r} and server {other!r} give the same tool ids ({mine}_<tool>), so the "
            f"tools of both get hashed ids ({mine}_<tool>_<hash>) instead; rename one of them"
        )
    return (
        f"server {name!r} and server {other!r} give tool ids that differ only in letter case "
        f"({mine}_<tool>, {theirs}_<tool>), easily confused by people and models; rename one of them"
    )
