"""A server's page in a real headless chromium: reached from the main page's link, it
shows the stderr tail and the latency plot of a few calls, follows the server killed by
the test to ``backoff`` and back to ``steady`` without a reload (its timeline gaining
the transitions), and counts a retry down locally, with no request, as the main page
does; script in the server's error text, stderr or a tool description never runs,
neither rendered by the server nor appended live."""

from __future__ import annotations

import re
from pathlib import Path

import trio

from tests.console.test_console_http import OPS, TOKENS
from tests.console.test_console_server_page import EVIL, GONE, evil_spec
from tests.support.admin import Http, admin_running, config_of, mini_spec, wait_for
from tests.support.browser import Page

STATE = "#server dd.state"


async def sign_in(browser: Page, url: str) -> None:
    await browser.goto(f"{url}/ui")
    await browser.fill('input[name="token"]', OPS)
    await browser.click('button[type="submit"]')
    await browser.wait_for_selector("table#servers")
    await browser.requested("/ui/fragments/servers")  # read once as its event stream opened


async def rows(browser: Page, table: str) -> int:
    count: int = await browser.evaluate(f"document.querySelectorAll('#{table} tbody tr').length")
    return count


def seconds(text: str) -> int:
    found = re.fullmatch(r"(\d+) s", text.strip())
    assert found is not None, text
    return int(found.group(1))


async def test_a_servers_page_follows_a_crash_and_counts_a_retry_down(tmp_path: Path, browser: Page) -> None:
    config = config_of(mini_spec("mini", "--stderr-lines", "3"), GONE, tokens=TOKENS)
    async with admin_running(config, tmp_path / "state") as api:
        with trio.fail_after(60):
            ops = Http(api.url, OPS)
            sid = await ops.session()
            for text in ("one", "two", "three"):
                await ops.call(sid, (await ops.turn(sid))["turn_id"], "mini_echo", {"text": text})
            await wait_for(ops, "/v1/servers/gone", lambda d: d["state"] == "backoff")
            await sign_in(browser, api.url)

            # The main page's retry column counts down by itself, and nothing is asked meanwhile.
            retry = 'tr[data-server="gone"] td.retry'
            before = seconds(await browser.text(retry))
            assert [r.url for r in await browser.idle(1.5)] == []
            assert 0 < seconds(await browser.text(retry)) < before  # ticks every 250 ms
            await browser.wait_for_text('tr[data-server="gone"] td.since', "ago")

            # The server's page, from its link: the stderr tail, the plot of the three calls.
            await browser.click('a[href="/ui/servers/mini"]')
            await browser.wait_for_text(STATE, "steady")
            assert "stderr line 2" in await browser.text("pre#stderr")
            await browser.wait_for_selector("svg.latency circle.p50", state="attached")
            await browser.wait_for_selector("svg.timeline rect.band", state="attached")
            before_rows = await rows(browser, "transitions")
            assert await browser.text("#server dd.reconnects") == "0"
            await browser.evaluate("window.sameDocument = true")

            # Killed (its crash tool): backoff, then steady again, on this very document.
            await ops.call(sid, (await ops.turn(sid))["turn_id"], "mini_crash")
            await browser.wait_for_text(STATE, "backoff")
            await browser.wait_for_text("#server dd.last-error", "closed the connection")
            await browser.screenshot("server-backoff")
            await browser.wait_for_text(STATE, "steady")
            assert await browser.evaluate("window.sameDocument === true")  # no reload
            assert await rows(browser, "transitions") >= before_rows + 2  # backoff, ..., steady
            assert await browser.text("#server dd.reconnects") == "1"  # counted as the API counts
            assert "backoff" in await browser.text("#restarts tbody")
            assert "ago" in await browser.text("#server dd.since")
            await browser.screenshot("server-page")

            # Its retry counts down on its own page too.
            before_page = len(browser.requests)
            await browser.goto(f"{api.url}/ui/servers/gone")
            await browser.wait_for_text(STATE, "backoff")
            await browser.requested("/ui/fragments/servers", before_page)
            before = seconds(await browser.text("#server dd.retry"))
            assert [r.url for r in await browser.idle(1.5)] == []
            assert seconds(await browser.text("#server dd.retry")) < before
            assert "/nonexistent/mcp-server" in await browser.text("#server dd.last-error")
            assert not browser.errors, browser.errors


async def test_script_in_a_servers_error_stderr_and_tool_never_runs(tmp_path: Path, browser: Page) -> None:
    async with admin_running(config_of(evil_spec(tmp_path), tokens=TOKENS), tmp_path / "state") as api:
        with trio.fail_after(60):
            await sign_in(browser, api.url)
            await browser.goto(f"{api.url}/ui/servers/evil")
            await browser.wait_for_text(STATE, "steady")
            assert EVIL in await browser.text("pre#stderr")  # the wrapper's first line, as text
            assert EVIL in await browser.text("#tools tbody")

            # Its crash: the reason carries the script, appended live with textContent.
            ops = Http(api.url, OPS)
            sid = await ops.session()
            await ops.call(sid, (await ops.turn(sid))["turn_id"], "evil_crash")
            await browser.wait_for_text("#transitions td.why", "window.pwned")
            await browser.wait_for_text(STATE, "steady")
            assert EVIL in await browser.text("#server dd.last-error")
            assert await browser.evaluate("window.pwned === undefined")

            # Rendered by the server this time: error, stderr, description and history.
            await browser.goto(f"{api.url}/ui/servers/evil")
            await browser.wait_for_text(STATE, "steady")
            assert EVIL in await browser.text("#server dd.last-error")
            assert EVIL in await browser.text("#restarts tbody")
            await browser.idle(0.5)  # time for an injected handler (an img's onerror) to fire
            assert await browser.evaluate("window.pwned === undefined")
            assert await browser.evaluate("document.querySelectorAll('main img, main script').length === 0")
            assert not browser.errors, browser.errors  # no dialog, no refused inline script
