"""The console's sections on what the sessions table cannot say in one row: each
2026-07-28 tenant state's contents (that era has no session; ``GET
/v1/gateway/sessions`` lists what its requests share instead) and the bridge's dial-out
peers (``GET /v1/bridge/peers``). Server-rendered, every value through
``html.escape``, like ``page.py``."""

from __future__ import annotations

from html import escape
from typing import Any

from actors.protocol.era import Era

NEW_ERA = Era.PER_REQUEST.value


def _td(value: Any) -> str:
    return f"<td>{'' if value is None else escape(str(value))}</td>"


def _table(ident: str, title: str, head: tuple[str, ...], rows: list[str]) -> str:
    heads = "".join(f"<th>{escape(h)}</th>" for h in head)
    return (
        f'<section><h2>{escape(title)}</h2><table id="{ident}"><thead><tr>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _client(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    return " ".join(str(value.get(k, "")) for k in ("name", "version")).strip()


def tenant_states_table(gateway: list[dict[str, Any]]) -> str:
    """The new-era rows of the gateway's listing, with what each state holds."""
    rows = [
        f'<tr data-tenant-state="{escape(str(item.get("session_id", "")))}">'
        + _td(item.get("tenant"))
        + _td(item.get("person"))
        + _td(_client(item.get("client")))
        + _td(", ".join(str(tool) for tool in item.get("activated", [])))
        + _td(", ".join(f"{a.get('permission')}: {a.get('decision')}" for a in item.get("approvals", [])))
        + _td(item.get("in_flight"))
        + _td(item.get("parked"))
        + _td(item.get("idle_s"))
        + "</tr>"
        for item in gateway
        if item.get("era") == NEW_ERA
    ]
    head = ("tenant", "person", "client", "activated", "for the session", "in flight", "parked", "idle s")
    return _table("tenant-states", f"Gateway tenant state ({NEW_ERA})", head, rows)


def peers_table(peers: list[dict[str, Any]]) -> str:
    """The dial-out bridge peers registered with this hub, with the servers each offers."""
    rows = [
        f'<tr data-peer="{escape(str(peer.get("peer", "")))}">'
        + _td(peer.get("peer"))
        + _td(
            ", ".join(f"{s.get('name')} ({str(s.get('digest', ''))[:12]})" for s in peer.get("servers", []))
        )
        + _td(peer.get("sessions"))
        + _td(peer.get("age_s"))
        + "</tr>"
        for peer in peers
    ]
    return _table("peers", "Bridge peers", ("peer", "servers (digest)", "sessions", "age s"), rows)


def session_sections(gateway: list[dict[str, Any]], peers: list[dict[str, Any]]) -> str:
    """Both sections, in the page's order."""
    return tenant_states_table(gateway) + peers_table(peers)
