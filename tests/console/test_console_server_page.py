"""A server's page, ``/ui/servers/<name>``, over the real server: what the API says of
one server (state, phase, since, the retry countdown, the last error with its age, the
stderr tail, transitions and restarts, era, tools, the latency plot and the state
timeline), the controls for the operator only, a 404 naming an unknown server, the
API's refusal ending the session as on the main page, the main page linking to it,
and script in a server's error text, stderr or tool description shown as text."""

from __future__ import annotations

import json
import re
import sys
from html import unescape
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.spec import ServerSpec, Start
from tests.console.test_console_http import OPS, TOKENS, sign_in
from tests.support.admin import ALICE, MINI, Http, admin_running, config_of, mini_spec, wait_for

EVIL = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2;alert(2)">'
WRAPPER = (
    "import subprocess, sys\n"
    "sys.stderr.write(sys.argv[1] + '\\n'); sys.stderr.flush()\n"
    "code = subprocess.run([sys.executable, *sys.argv[2:]]).returncode\n"
    "sys.stderr.write(sys.argv[1] + '\\n'); sys.stderr.flush()\n"
    "sys.exit(code)\n"
)
"""A mini server inside a process that writes its first argument to stderr before the
server starts and after it exits: the stderr tail and the last error both carry it."""
GONE = ServerSpec(
    name="gone",
    command=("/nonexistent/mcp-server",),
    start=Start.EAGER,
    reconnect_schedule_s=(30.0,),
    reconnect_jitter=0.0,
)
"""A server that cannot start: in backoff, its next try 30 s away."""


def evil_spec(folder: Path, name: str = "evil") -> ServerSpec:
    """A server whose stderr, last error (after its crash tool) and one tool's
    description are ``EVIL``."""
    tools = folder / "evil-tools.json"
    tools.write_text(json.dumps([{"name": "evil", "description": EVIL, "inputSchema": {"type": "object"}}]))
    command = (sys.executable, "-c", WRAPPER, EVIL, MINI, "--tools-file", str(tools))
    return ServerSpec(name=name, command=command, trusted=True, start=Start.EAGER, shutdown_grace_s=0.5)


async def crash_and_wait(api_url: str, server: str, until_error: str) -> dict[str, Any]:
    """Call ``server``'s crash tool, then wait until its last error names ``until_error``
    and it is steady again; its detail then."""
    ops = Http(api_url, OPS)
    sid = await ops.session()
    await ops.call(sid, (await ops.turn(sid))["turn_id"], f"{server}_crash")
    detail: dict[str, Any] = await wait_for(
        ops,
        f"/v1/servers/{server}",
        lambda d: until_error in (d["last_error"] or "") and d["state"] == "steady",
        timeout_s=15,
    )
    return detail


async def page_of(http: Http, cookie: str, name: str) -> tuple[int, str]:
    answer = await http.request("GET", f"/ui/servers/{name}", headers={"Cookie": cookie})
    return answer.status, answer.body.decode()


def fact(page: str, name: str) -> str:
    """The text of one ``<dd class=name>`` of the facts list."""
    found = re.search(rf'<dd class="{name}">(.*?)</dd>', page)
    assert found is not None, name
    return unescape(re.sub(r"<[^>]+>", "", found.group(1)))


async def test_a_servers_page_shows_what_the_api_says_of_it(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", "--stderr-lines", "3"), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        http, ops = Http(api.url), Http(api.url, OPS)
        with trio.fail_after(30):
            sid = await ops.session()
            for _ in range(3):
                reply = await ops.call(sid, (await ops.turn(sid))["turn_id"], "mini_echo", {"text": "hi"})
                assert reply.json()["ok"] is True
            await crash_and_wait(api.url, "mini", "closed the connection")
            detail = (await ops.request("GET", "/v1/servers/mini")).json()
            cookie, _ = await sign_in(http, OPS)
            status, page = await page_of(http, cookie, "mini")
        assert status == 200
        assert (
            not re.search(r"<script(?![^>]*\bsrc=)", page) and " style=" not in page and "<style" not in page
        )
        assert 'id="server" data-server="mini" data-state="steady"' in page
        assert fact(page, "state") == "steady" and fact(page, "tools") == str(detail["tools"])
        assert fact(page, "reconnects") == "1" and fact(page, "attempt") == str(detail["attempt"])
        assert "UTC" in fact(page, "since") and "ago" in fact(page, "since")
        assert "closed the connection" in fact(page, "last-error") and "ago" in fact(page, "last-error")
        assert fact(page, "era") == f"{detail['protocol_version']} (handshake era)"
        assert fact(page, "transport").startswith("pid=")  # a local server: its process
        # The transitions, as a table and a timeline; the restart among them, with its reason.
        transitions = re.search(r'<table id="transitions">.*?</table>', page, re.S)
        assert transitions is not None
        assert transitions.group(0).count("<tr>") == len(detail["transitions"]) + 1  # and the head
        restarts = re.search(r'<table id="restarts">(.*?)</table>', page, re.S)
        assert restarts is not None and "<td>steady</td><td>backoff</td>" in restarts.group(1)
        assert "closed the connection" in restarts.group(1)
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="plot timeline"' in page
        assert (
            '<rect class="band" data-state="backoff"' in page
            and '<rect class="band" data-state="steady"' in page
        )
        # The latency of the three calls: a point of each percentile in the last bucket or two.
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="plot latency"' in page
        assert '<circle class="p50"' in page and '<circle class="p99"' in page and "no calls" not in page
        # The stderr tail, the tools with their descriptions, the operator's controls.
        stderr = re.search(r'<pre id="stderr">(.*?)</pre>', page, re.S)
        assert stderr is not None and "stderr line 2" in stderr.group(1)
        assert "<td>echo</td><td>mini_echo</td>" in page
        assert 'data-act="restart" data-arg="mini"' in page and 'data-act="disable" data-arg="mini"' in page


async def test_a_tenant_sees_the_page_without_the_controls_and_a_backoff_counts_down(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini"), GONE, tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            await wait_for(Http(api.url, OPS), "/v1/servers/gone", lambda d: d["state"] == "backoff")
            cookie, _ = await sign_in(http, ALICE)
            status, page = await page_of(http, cookie, "gone")
            main = (await http.request("GET", "/ui", headers={"Cookie": cookie})).body.decode()
        assert status == 200 and "data-act=" not in page  # server control is the operator's
        assert fact(page, "state") == "backoff" and "/nonexistent/mcp-server" in fact(page, "last-error")
        countdown = re.search(r'<dd class="retry"><span class="countdown" data-countdown="([\d.]+)">', page)
        assert countdown is not None and 0 < float(countdown.group(1)) <= 30  # the API's retry_in_s
        # The main page: each name links to its page; since, the retry countdown, the error's age.
        assert '<a href="/ui/servers/gone">gone</a>' in main and '<a href="/ui/servers/mini">mini</a>' in main
        row = re.search(r'<tr data-server="gone">.*?</tr>', main)
        assert row is not None
        assert '<td class="retry"><span class="countdown" data-countdown=' in row.group(0)
        assert '<td class="since"><span class="age" data-age=' in row.group(0)
        assert re.search(
            r'</span> \(<span class="age" data-age="[\d.]+">\d+ s</span> ago\)</td>', row.group(0)
        )


async def test_an_unknown_server_is_a_404_page_naming_it(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            cookie, _ = await sign_in(http, OPS)
            status, page = await page_of(http, cookie, "nope")
            assert status == 404 and "no server named &#x27;nope&#x27;" in page and 'href="/ui"' in page
            status, page = await page_of(http, cookie, "%3Cscript%3Ealert(1)%3C%2Fscript%3E")
            assert status == 404 and "<script>alert" not in page and "&lt;script&gt;alert(1)" in page
            status, _ = await page_of(http, cookie, "mini/latency")  # no page under a server's
            assert status == 404
            signed_out = await http.request("GET", "/ui/servers/mini")
            assert (signed_out.status, signed_out.headers["location"]) == (303, "/ui/login")


async def test_a_token_the_api_no_longer_accepts_ends_the_session_on_a_servers_page(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        http = Http(api.url)
        with trio.fail_after(20):
            cookie, _ = await sign_in(http, ALICE)
            assert (await page_of(http, cookie, "mini"))[0] == 200
            await api.sup.reload(
                attrs.evolve(config, admin=attrs.evolve(config.admin, tokens={OPS: TOKENS[OPS]}))
            )
            ended = await http.request("GET", "/ui/servers/mini", headers={"Cookie": cookie})
            assert (ended.status, ended.headers["location"]) == (303, "/ui/login")
            assert (
                "mcp_console=;" in ended.headers["set-cookie"] or "Max-Age=0" in ended.headers["set-cookie"]
            )
            again = await http.request("GET", "/ui", headers={"Cookie": cookie})
            assert again.headers["location"] == "/ui/login"  # the session is gone


async def test_script_in_error_text_stderr_and_a_description_is_markup_of_text(tmp_path: Path) -> None:
    async with admin_running(config_of(evil_spec(tmp_path), tokens=TOKENS), tmp_path / "state") as api:
        http = Http(api.url)
        with trio.fail_after(30):
            detail = await crash_and_wait(api.url, "evil", EVIL)
            assert EVIL in detail["stderr_tail"]
            cookie, _ = await sign_in(http, OPS)
            status, page = await page_of(http, cookie, "evil")
        assert status == 200
        assert "<script>window" not in page and "<img" not in page and 'onerror="' not in page
        escaped = (
            "&lt;script&gt;window.pwned=1&lt;/script&gt;"
            "&lt;img src=x onerror=&quot;window.pwned=2;alert(2)&quot;&gt;"
        )
        assert escaped in fact_html(page, "last-error")
        stderr = re.search(r'<pre id="stderr">(.*?)</pre>', page, re.S)
        assert stderr is not None and escaped in stderr.group(1)
        assert f'<td class="description">{escaped}</td>' in page
        assert escaped in re.search(r'<table id="transitions">.*?</table>', page, re.S).group(0)  # type: ignore[union-attr]


def fact_html(page: str, name: str) -> str:
    found = re.search(rf'<dd class="{name}">(.*?)</dd>', page)
    assert found is not None, name
    return found.group(1)
