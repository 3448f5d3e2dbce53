"""Read-only pieces of the page for ``console.js``: ``GET /ui/fragments/<name>``.

An event says that something changed, not always all of it: the ``approval`` event
names the tool, server and reason of a pending ask but not its arguments, and no event
lists the calls in flight. So the script fetches ``/ui/fragments/approvals`` once per
pending-approval event, and ``/ui/fragments/calls`` once per ``approval`` or ``call``
event (a call waits, a call ended; never on a timer): the documented ``GET
/v1/approvals`` and ``GET /v1/calls``, made in process with the session's own token
(``inprocess.py``: the API's roles and tenants decide what is in them), each item's
cells as the page would show them, as text the script sets with ``textContent``.

``FRAGMENTS`` is the allow-list: no other API path is reachable through here. Reading
changes nothing, so no CSRF token is asked for; a signed-out caller is sent to the
sign-in as on every page route (``app.py``), and a refused token ends its session.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from supervisor.console.inprocess import Asgi, call
from supervisor.console.page import arguments_text


@attrs.frozen
class Fragment:
    """One readable piece: the API path it reads, and what of its answer is handed on."""

    path: str
    shape: Callable[[Any], Any]


def approval_cells(listing: Any) -> dict[str, Any]:
    """Each pending approval's cells, as text (the arguments as the page shows them)."""
    items = listing.get("approvals", []) if isinstance(listing, dict) else []
    cells = ("id", "tool", "server", "reason", "tenant")
    return {
        "approvals": [
            {**{k: item.get(k) for k in cells}, "arguments": arguments_text(item)} for item in items
        ]
    }


CALL_CELLS = ("call_id", "server", "tool", "tenant", "session", "age_s")
"""What the calls table shows of each call in flight (``page.calls_table``'s columns)."""


def call_cells(listing: Any) -> dict[str, Any]:
    """Each call in flight's cells, oldest first."""
    items = listing.get("calls", []) if isinstance(listing, dict) else []
    return {"calls": [{k: item.get(k) for k in CALL_CELLS} for item in items]}


SERVER_CELLS = ("name", "state", "phase", "retry_in_s", "last_error")
"""What the script sets of each server when its event stream (re)opens."""


def server_cells(listing: Any) -> dict[str, Any]:
    """Each server's state as the servers table shows it: read when the page's event
    stream opens, since a change between the page's render and its subscription (or
    while the stream was down) brings no event the page could still hear."""
    items = listing.get("servers", []) if isinstance(listing, dict) else []
    return {"servers": [{k: item.get(k) for k in SERVER_CELLS} for item in items]}


FRAGMENTS: Mapping[str, Fragment] = {
    "approvals": Fragment("/v1/approvals", approval_cells),
    "calls": Fragment("/v1/calls", call_cells),
    "servers": Fragment("/v1/servers", server_cells),
}


async def fragment(api: Asgi, name: str, *, host: str, token: str | None, client: Any) -> tuple[int, bytes]:
    """The status and JSON body of ``GET /ui/fragments/<name>``; an API refusal is
    passed on as the API gave it."""
    chosen = FRAGMENTS.get(name)
    if chosen is None:
        known = ", ".join(sorted(FRAGMENTS))
        return 404, json.dumps({"error": f"no console fragment {name!r}: the fragments are {known}"}).encode()
    answer = await call(api, "GET", chosen.path, host=host, token=token, client=client)
    if answer.status != 200:
        return answer.status, answer.body or b"{}"
    return 200, json.dumps(chosen.shape(answer.json())).encode()
