"""A session's handlers of server requests: sampling, elicitation and roots.

A host attaches them per session (``sup.session(sampling=..., elicitation=...,
roots=...)``) so that a server's request made while serving one session's call is
answered by that session (``actors/connection/server_requests.py`` says how a request
is known to be a call's). Each handler is an async callable ``(server, params) ->
result``: ``server`` names the MCP server that asks, ``params`` are the request's
params as sent, and the result is the request's result as MCP defines it (None: this
session does not handle it, so the supervisor-level handler is asked next).

- ``sampling``: ``sampling/createMessage``.
- ``elicitation``: ``elicitation/create``, in both modes: form (``params["mode"]``
  absent or ``"form"``, with ``requestedSchema``) and URL (``"url"``, with ``url`` and
  ``elicitationId``).
- ``roots``: ``roots/list``: a static list of roots (``"file:///…"`` strings, or
  ``{"uri", "name"}`` mappings), or an async callable returning such a list (or the
  whole result, ``{"roots": [...]}``).

What a session declares follows from them (``capabilities``): the supervisor-level
``client_capabilities``, with each kind the session handles declared as it handles
it. That is what the session's own connections (``scope: session``) declare at
``initialize``, and what each of its calls declares in the per-request era.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from actors.connection.client_side import ClientSide

RequestHandler: TypeAlias = Callable[[str, Any], Awaitable[Mapping[str, Any] | None]]
"""``(server, params) -> result``, or None when the session does not handle it."""
Root: TypeAlias = str | Mapping[str, Any]
RootsSource: TypeAlias = Sequence[Root] | Callable[[str, Any], Awaitable[Any]]

SAMPLING = "sampling/createMessage"
ELICITATION = "elicitation/create"
ROOTS = "roots/list"


def _root(root: object, where: str) -> dict[str, Any]:
    """One root as MCP sends it; a ValueError naming ``where`` and the fix otherwise."""
    if isinstance(root, str):
        root = {"uri": root}
    if not isinstance(root, Mapping) or not isinstance(root.get("uri"), str):
        raise ValueError(f"{where}: a root is a file:// URI string or a mapping with a 'uri'; got {root!r}")
    if not root["uri"].startswith("file://"):
        raise ValueError(f"{where}: a root's uri must be a file:// URI (MCP roots); got {root['uri']!r}")
    name = root.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"{where}: a root's name must be a string; got {name!r}")
    return dict(root)


def _roots_result(found: Any, where: str) -> dict[str, Any]:
    if isinstance(found, Mapping) and "roots" in found:
        found = found["roots"]
    if isinstance(found, str) or not isinstance(found, Sequence):
        raise ValueError(f"{where}: expected a list of roots; got {found!r}")
    return {"roots": [_root(root, where) for root in found]}


@attrs.frozen(slots=True, eq=False)
class SessionHandlers:
    """The handlers one session attaches (see the module docstring)."""

    sampling: RequestHandler | None = None
    elicitation: RequestHandler | None = None
    roots: RootsSource | None = None
    _static_roots: dict[str, Any] | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        for name in ("sampling", "elicitation"):
            handler = getattr(self, name)
            if handler is not None and not callable(handler):
                raise TypeError(
                    f"session {name}=: expected an async callable (server, params); got {handler!r}"
                )
        if self.roots is not None and not callable(self.roots):
            object.__setattr__(self, "_static_roots", _roots_result(self.roots, "session roots="))

    @property
    def any(self) -> bool:
        """Does the session handle anything itself?"""
        return self.sampling is not None or self.elicitation is not None or self.roots is not None

    def capabilities(self, default: Mapping[str, Any]) -> dict[str, Any]:
        """What the session declares: ``default`` (the supervisor-level capabilities)
        with each kind it handles declared as it handles it."""
        declared = dict(default)
        if self.sampling is not None:
            declared["sampling"] = {}
        if self.elicitation is not None:
            declared["elicitation"] = {"form": {}, "url": {}}
        if self.roots is not None:
            declared["roots"] = {"listChanged": False}
        return declared

    async def handle(self, server: str, method: str, params: Any) -> Mapping[str, Any] | None:
        """The session's answer to one server request; None when it does not handle it."""
        if method == SAMPLING and self.sampling is not None:
            return await self.sampling(server, params)
        if method == ELICITATION and self.elicitation is not None:
            return await self.elicitation(server, params)
        if method == ROOTS and self.roots is not None:
            if self._static_roots is not None:
                return self._static_roots
            assert callable(self.roots)
            found = await self.roots(server, params)
            return None if found is None else _roots_result(found, f"the roots handler for {server}")
        return None

    def client_side(self, session: str, default: Mapping[str, Any]) -> ClientSide:
        """The session's side of its calls (``CallTool.client``)."""
        return ClientSide(session, self.handle if self.any else None, self.capabilities(default))
