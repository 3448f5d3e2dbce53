"""The console's audit page (``GET /ui/audit``) over the real server: signed out, a
redirect; the search's filters reach ``GET /v1/audit`` with the session's own token, so
a tenant sees its own rows and the API's refusal (a tenant naming another) is shown as
text; newest first, readable times, an "older" link that carries the API's cursor and
the search; a trace link only for a row with a trace id under ``console.trace_url``."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import quote, urlencode

import attrs
import trio

from supervisor.console.audit_page import audit_page, readable_time
from supervisor.console.sessions import ConsoleSession
from supervisor.runtime import tracing
from supervisor.settings.console import ConsoleSettings
from supervisor.settings.model import Role, TokenGrant
from tests.console.test_console_http import sign_in
from tests.support.admin import ALICE, BOB, Http, Running, admin_running, config_of, mini_spec
from tests.support.traces import Traces

OPS = "ops-audit-token-0123456789"
JAEGER = "http://127.0.0.1:16686/trace/{trace_id}"
TOKENS = {OPS: TokenGrant("ops", Role.OPERATOR), ALICE: "alice", BOB: "bob"}
_ROW = re.compile(r'<tr class="audit-row">(.*?)</tr>', re.S)
_CELL = re.compile(r'<td class="([\w-]+)">(.*?)</td>', re.S)


def rows_of(page: str) -> list[dict[str, str]]:
    """Each audit row's cells by class (``tenant``, ``tool``, ``at``…), as text."""
    return [
        {name: html.unescape(text) for name, text in _CELL.findall(row.split("<details>")[0])}
        for row in _ROW.findall(page)
    ]


async def make_calls(api: Running, *calls: tuple[str, str]) -> None:
    """One session per token, and each (token, tool) call in order; then the rows are
    in the store."""
    sessions: dict[str, tuple[str, str]] = {}
    for token, tool in calls:
        http = Http(api.url, token)
        if token not in sessions:
            sid = await http.session()
            sessions[token] = (sid, (await http.turn(sid))["turn_id"])
        sid, tid = sessions[token]
        arguments = {"text": "x"} if tool == "mini_echo" else {"a": 1, "b": 2}
        assert (await http.call(sid, tid, tool, arguments)).json()["ok"]
    await api.sup.store.flush()


async def page(http: Http, cookie: str, query: dict[str, str] | None = None) -> tuple[int, str]:
    path = "/ui/audit" + (f"?{urlencode(query)}" if query else "")
    answer = await http.request("GET", path, headers={"Cookie": cookie})
    return answer.status, answer.body.decode()


async def test_the_audit_search_runs_with_the_sessions_token(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(30):
            signed_out = await http.request("GET", "/ui/audit?tool=mini_echo")
            assert (signed_out.status, signed_out.headers["location"]) == (303, "/ui/login")
            await make_calls(api, (ALICE, "mini_echo"), (BOB, "mini_add"), (BOB, "mini_echo"))
            ops, _ = await sign_in(http, OPS)
            main = (await http.request("GET", "/ui", headers={"Cookie": ops})).body.decode()
            assert '<a id="nav-audit" href="/ui/audit">' in main  # the way from the main page

            status, everyone = await page(http, ops)
            assert status == 200 and 'id="audit-search"' in everyone
            assert 'href="/ui"' in everyone  # the way back to the main page
            found = rows_of(everyone)
            assert [(r["tenant"], r["tool"]) for r in found] == [  # newest first
                ("bob", "mini_echo"),
                ("bob", "mini_add"),
                ("alice", "mini_echo"),
            ]
            assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", r["at"]) for r in found)
            assert all(r["outcome"] == "ok" and r["duration"].endswith(" ms") for r in found)
            assert everyone.count("<details>") == 3 and "args_sha256" in everyone

            # Each filter goes through to the API as typed.
            only = {"tenant": "bob", "tool": "mini_echo", "server": "mini", "outcome": "ok", "person": "bob"}
            _, filtered = await page(http, ops, only)
            assert [(r["tenant"], r["tool"]) for r in rows_of(filtered)] == [("bob", "mini_echo")]
            assert 'name="tool" value="mini_echo"' in filtered  # the form keeps the search
            _, none = await page(http, ops, {"outcome": "denied"})
            assert rows_of(none) == [] and "No audit rows match." in none
            _, later = await page(http, ops, {"since": "2999-01-01T00:00"})  # a browser's datetime-local
            assert rows_of(later) == []
            _, earlier = await page(http, ops, {"until": "2999-01-01T00:00:00", "since": "2000-01-01T00:00"})
            assert len(rows_of(earlier)) == 3

            # A page at a time: "older" carries the API's cursor and the search.
            _, first = await page(http, ops, {"tool": "mini_echo", "limit": "1"})
            assert [r["tenant"] for r in rows_of(first)] == ["bob"]
            older = re.search(r'<a id="older" href="([^"]+)"', first)
            assert older is not None
            link = html.unescape(older.group(1))
            assert link.startswith("/ui/audit?") and "tool=mini_echo" in link and "cursor=" in link
            second = (await http.request("GET", link, headers={"Cookie": ops})).body.decode()
            assert [r["tenant"] for r in rows_of(second)] == ["alice"]
            assert 'id="older"' not in second  # no more

            # A tenant: its own rows only; naming another tenant is the API's 400, as text.
            alice, _ = await sign_in(http, ALICE)
            _, own = await page(http, alice)
            assert [r["tenant"] for r in rows_of(own)] == ["alice"]
            status, refused = await page(http, alice, {"tenant": "bob"})
            assert status == 400 and rows_of(refused) == []
            assert "refused (400)" in refused and "drop tenant=" in refused
            evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
            status, injected = await page(http, alice, {"tenant": evil})
            assert status == 400 and "drop tenant=" in injected
            assert "<script>window" not in injected and "<img src=x" not in injected
            assert html.escape(evil, quote=False)[:30] in injected  # shown, as text
            assert not re.search(r"<script(?![^>]*\bsrc=)", injected)  # no inline script anywhere

            # A time the console cannot read is refused before the API, saying how to write it.
            status, bad = await page(http, ops, {"since": "yesterday"})
            shown = html.unescape(bad)
            assert status == 400 and "since='yesterday' is not a time" in shown
            assert "like 2026-11-28T15:47 (UTC)" in shown


async def test_a_trace_link_only_for_a_row_with_a_trace_id_under_console_trace_url(
    tmp_path: Path, traces: Traces
) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(30):
            await make_calls(api, (ALICE, "mini_echo"))  # traced (traces are on)
            tracing.TRACING.active = None  # traces off (the fixture puts them back)
            await make_calls(api, (ALICE, "mini_add"))
            ops, _ = await sign_in(http, OPS)
            untraced_row, traced_row = api.sup.store.store.audit_rows(tenant="alice")
            trace_id = traced_row.trace_id
            assert trace_id is not None and re.fullmatch(r"[0-9a-f]{32}", trace_id)
            assert untraced_row.tool == "mini_add" and untraced_row.trace_id is None

            _, plain = await page(http, ops)  # no console.trace_url: the id as text only
            assert trace_id in plain and 'class="trace"' not in plain

            template = "http://127.0.0.1:16686/trace/{trace_id}?from=console&x=<b>"
            await api.sup.reload(attrs.evolve(config, console=ConsoleSettings(trace_url=template)))
            _, linked = await page(http, ops)
            links = re.findall(r'<a class="trace" href="([^"]+)"', linked)
            assert [html.unescape(link) for link in links] == [
                f"http://127.0.0.1:16686/trace/{trace_id}?from=console&x=<b>"
            ]  # one: the untraced row (mini_add, newest) has none
            assert "x=&lt;b&gt;" in linked  # the template itself escaped into the attribute
            [untraced, traced] = _ROW.findall(linked)
            assert "mini_add" in untraced and 'class="trace"' not in untraced
            assert "mini_echo" in traced and 'class="trace"' in traced
            assert ConsoleSettings(trace_url=template).trace_link("a/b c") == (
                f"http://127.0.0.1:16686/trace/{quote('a/b c', safe='')}?from=console&x=<b>"
            )


def test_every_value_of_a_row_is_escaped_and_its_details_shown() -> None:
    """What the API gives is rendered as text: script in an error, a tool, a call id or a
    field the API adds later never becomes markup; the call id has a column when a row
    has one; the details hold whatever the row has."""
    evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    session = ConsoleSession("id", None, "csrf", "operator", "ops", 0.0)
    row = {
        "at": 1764345600.25, "tenant": "alice", "person": None, "session": "s1", "server": "mini",
        "tool": evil, "decision": "allow", "outcome": "tool_error", "duration_ms": 12,
        "args_sha256": "ab" * 32, "args_bytes": 14, "result_bytes": 99, "call_id": evil, "error": evil,
        "trace_id": '"><script>x</script>', "replica": None, "cancelled_by": "operator ops", "later": evil,
    }  # fmt: skip
    shown = audit_page(
        session, {"tool": evil}, {"rows": [row], "cursor": evil}, None, ConsoleSettings(JAEGER)
    )
    assert "<script>window" not in shown and "<img src=x" not in shown and "<script>x" not in shown
    assert not re.search(r"<script(?![^>]*\bsrc=)", shown) and "<script" not in shown  # the page loads none
    [cells] = rows_of(shown)
    assert cells["at"] == "2025-11-28 16:00:00.250" and cells["duration"] == "12 ms"
    assert cells["tool"] == cells["call"] == evil  # a column of its own, as text
    details = dict(re.findall(r'<dt>(\w+)</dt><dd class="\w+">(.*?)</dd>', shown))
    assert {k: html.unescape(v) for k, v in details.items()} == {
        "outcome": "tool_error", "duration_ms": "12", "decision": "allow", "session": "s1", "call_id": evil,
        "args_sha256": "ab" * 32, "args_bytes": "14", "result_bytes": "99", "error": evil,
        "cancelled_by": "operator ops", "trace_id": '"><script>x</script>', "later": evil,
    }  # fmt: skip
    [link] = re.findall(r'<a class="trace" href="([^"]+)"', shown)
    assert html.unescape(link) == "http://127.0.0.1:16686/trace/" + quote('"><script>x</script>', safe="")
    older = re.search(r'<a id="older" href="([^"]+)"', shown)
    assert older is not None and html.unescape(older.group(1)) == "/ui/audit?" + urlencode(
        {"tool": evil, "cursor": evil}
    )
    assert 'class="call"' not in audit_page(
        session, {}, {"rows": [{**row, "call_id": None}]}, None, ConsoleSettings()
    )
    assert readable_time("soon") == "soon" and readable_time(1e300) == "1e+300"
