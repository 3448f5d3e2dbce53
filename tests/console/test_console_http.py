"""The console at ``/ui`` over the real server: sign-in with a token kept behind an
``HttpOnly``, ``SameSite=Strict`` cookie that is no credential for ``/v1/*``; the
state-changing routes (one table, ``ACTIONS``) refused without the CSRF token, from
another origin, and by the API for a role that may not; a token removed by a reload
ends its console sessions; every value on the page escaped, no inline script."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import attrs
import pytest
import trio

from supervisor.console.app import ACTIONS, SECURITY_HEADERS
from supervisor.console.page import main_page
from supervisor.console.sessions import ConsoleSession
from supervisor.settings.model import Role, TokenGrant
from tests.support.admin import ALICE, Http, admin_running, config_of, mini_spec

OPS = "ops-console-token-0123456789"
TOKENS = {OPS: TokenGrant("ops", Role.OPERATOR), ALICE: "alice"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def sign_in(http: Http, token: str) -> tuple[str, str]:
    """The cookie and the page's CSRF token of a new console session."""
    origin = {"Origin": f"http://{http.authority}", **FORM}
    answer = await http.request(
        "POST", "/ui/login", body=urlencode({"token": token}).encode(), headers=origin
    )
    assert answer.status == 303 and answer.headers["location"] == "/ui", answer
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    value = cookie.split(";")[0]
    page = await http.request("GET", "/ui", headers={"Cookie": value})
    assert page.status == 200, page
    csrf = re.search(r'data-csrf="([^"]+)"', page.body.decode())
    assert csrf is not None
    return value, csrf.group(1)


async def test_sign_in_sets_a_ui_only_cookie_and_the_page_lists_the_servers(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            signed_out = await http.request("GET", "/ui")
            assert (signed_out.status, signed_out.headers["location"]) == (303, "/ui/login")
            login = await http.request("GET", "/ui/login")
            assert login.status == 200 and "<script>" not in login.body.decode()
            for name, value in SECURITY_HEADERS.items():
                assert login.headers[name.lower()] == value
            assert "script-src 'self'" in login.headers["content-security-policy"]
            wrong = await http.request(
                "POST",
                "/ui/login",
                body=b"token=nope",
                headers={"Origin": f"http://{http.authority}", **FORM},
            )
            assert wrong.status == 401 and "set-cookie" not in wrong.headers
            cookie, _ = await sign_in(http, OPS)
            page = (await http.request("GET", "/ui", headers={"Cookie": cookie})).body.decode()
            assert 'data-server="mini"' in page and "ops (operator)" in page
            assert not re.search(r"<script(?![^>]*\bsrc=)", page)  # no inline script
            script = await http.request("GET", "/ui/static/console.js", headers={"Cookie": cookie})
            assert script.status == 200 and script.headers["content-type"].startswith("text/javascript")
            # The cookie is no credential for the API.
            assert (await http.request("GET", "/v1/servers", headers={"Cookie": cookie})).status == 401


@pytest.mark.parametrize("name", sorted(ACTIONS))
async def test_every_state_changing_route_needs_csrf_same_origin_and_the_apis_role(
    tmp_path: Path, name: str
) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            cookie, csrf = await sign_in(http, ALICE)  # a tenant
            same = {"Cookie": cookie, "Origin": f"http://{http.authority}"}
            path = f"/ui/act/{name}/mini"
            no_csrf = await http.request("POST", path, headers=same)
            assert no_csrf.status == 403 and "CSRF" in no_csrf.body.decode()
            foreign = await http.request(
                "POST", path, headers={**same, "Origin": "http://evil.example", "X-CSRF-Token": csrf}
            )
            assert foreign.status == 403 and "cross-origin" in foreign.body.decode()
            no_origin = await http.request("POST", path, headers={"Cookie": cookie, "X-CSRF-Token": csrf})
            assert no_origin.status == 403
            as_tenant = await http.request("POST", path, headers={**same, "X-CSRF-Token": csrf})
            if ACTIONS[name].path.startswith("/v1/servers/"):
                assert as_tenant.status == 403, as_tenant  # server control is the operator's
            else:
                assert as_tenant.status == 404, as_tenant  # no such approval or call of hers
            signed_out = await http.request(
                "POST", path, headers={"Origin": same["Origin"], "X-CSRF-Token": csrf}
            )
            assert signed_out.status == 303


async def test_the_operator_restarts_a_server_from_the_console(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            cookie, csrf = await sign_in(http, OPS)
            headers = {"Cookie": cookie, "Origin": f"http://{http.authority}", "X-CSRF-Token": csrf}
            restarted = await http.request("POST", "/ui/act/restart/mini", headers=headers)
            assert restarted.status in (200, 202, 204), restarted


async def test_a_token_removed_by_a_reload_ends_its_console_sessions(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            cookie, _ = await sign_in(http, ALICE)
            await api.sup.reload(
                attrs.evolve(config, admin=attrs.evolve(config.admin, tokens={OPS: TOKENS[OPS]}))
            )
            ended = await http.request("GET", "/ui", headers={"Cookie": cookie})
            assert (ended.status, ended.headers["location"]) == (303, "/ui/login")
            again = await http.request("GET", "/ui", headers={"Cookie": cookie})
            assert again.headers["location"] == "/ui/login"  # the session is gone, not just refused once


def test_every_value_on_the_page_is_escaped() -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    session = ConsoleSession("id", None, "csrf", "operator", "ops", 0.0)
    servers = {
        "servers": [{"name": evil, "state": "backoff", "last_error": evil, "enabled": True, "tools": 1}]
    }
    approvals = {
        "approvals": [{"id": evil, "tool": evil, "server": evil, "arguments": {"a": evil}, "reason": evil}]
    }
    page = main_page(session, servers, approvals)
    assert "<script>alert" not in page and "<img" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;" in page


async def test_the_page_is_live_through_the_relayed_event_stream(tmp_path: Path) -> None:
    """``/ui/events`` is ``/v1/events`` with the session's token: a restart from the
    console arrives as the server's state changes, with the console's headers."""
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            cookie, csrf = await sign_in(http, OPS)
            async with http.stream("GET", "/ui/events", headers={"Cookie": cookie}) as events:
                assert events.status == 200 and events.headers["content-type"].startswith("text/event-stream")
                assert (
                    events.headers["content-security-policy"] == SECURITY_HEADERS["Content-Security-Policy"]
                )
                act = {"Cookie": cookie, "Origin": f"http://{http.authority}", "X-CSRF-Token": csrf}
                assert (await http.request("POST", "/ui/act/restart/mini", headers=act)).status < 300
                seen = await events.until(lambda e: e.event == "state" and e.data.get("state") == "steady")
                assert any(e.event == "state" and e.data["server"] == "mini" for e in seen)
            refused = Http(api.url)  # no cookie: no stream
            assert (await refused.request("GET", "/ui/events")).status == 303


async def test_the_page_lists_the_sessions_a_token_may_see(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            mine = await Http(api.url, ALICE).session()
            theirs = await Http(api.url, OPS).session()
            cookie, _ = await sign_in(http, ALICE)
            page = (await http.request("GET", "/ui", headers={"Cookie": cookie})).body.decode()
            assert mine in page and theirs not in page  # a tenant sees only its own
            cookie, _ = await sign_in(http, OPS)
            page = (await http.request("GET", "/ui", headers={"Cookie": cookie})).body.decode()
            assert mine in page and theirs in page  # the operator every tenant's
