"""The console in a real headless chromium (Debian's, through Playwright): signing in
with the form, a server killed by the test going to ``backoff`` and back to ``steady``
on the page without a reload, a pending call approved from the page and finished, and
an idle page making no request but its event stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from supervisor.settings.model import TrustRule, TrustSettings
from tests.console.test_console_http import OPS, TOKENS
from tests.support.admin import ALICE, Http, admin_running, config_of, mini_spec
from tests.support.browser import Page

STATE = 'tr[data-server="mini"] td.state'


async def test_the_console_in_a_browser_follows_a_server_and_answers_an_approval(
    tmp_path: Path, browser: Page
) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    trust = TrustSettings(rules=(TrustRule("mcp:mini:add", action="ask"),), approval_timeout_s=60)
    async with admin_running(attrs.evolve(config, trust=trust), tmp_path / "state") as api:
        with trio.fail_after(60):
            await browser.goto(f"{api.url}/ui")
            await browser.wait_for_selector('input[name="token"]')  # signed out: the sign-in form
            await browser.fill('input[name="token"]', OPS)
            await browser.click('button[type="submit"]')
            await browser.wait_for_text(STATE, "steady")
            await browser.screenshot("signed-in")

            # The backend dies (its crash tool): the row goes to backoff, then steady again.
            ops = Http(api.url, OPS)
            sid = await ops.session()
            turn = (await ops.turn(sid))["turn_id"]
            await ops.call(sid, turn, "mini_crash")
            await browser.wait_for_text(STATE, "backoff")
            await browser.screenshot("backoff")
            await browser.wait_for_text(STATE, "steady")

            # A call that asks: its approval appears live, and the page answers it.
            async with trio.open_nursery() as nursery:
                answered: list[Any] = []

                async def add() -> None:
                    turn_now = (await ops.turn(sid))["turn_id"]
                    answered.append(await ops.call(sid, turn_now, "mini_add", {"a": 2, "b": 3}))

                nursery.start_soon(add)
                await browser.wait_for_selector('tr[data-approval] button[data-act="allow-once"]')
                await browser.screenshot("approval")
                await browser.click('tr[data-approval] button[data-act="allow-once"]')
            reply = answered[0]
            assert reply.status == 200 and reply.json()["ok"] is True, reply
            await browser.wait_for_selector("tr[data-approval]", state="detached")
            await browser.screenshot("console")

            # Idle: no request but the event stream it holds open.
            assert [request.url for request in await browser.idle(10.0)] == []
            assert not [e for e in browser.errors if "favicon" not in e], browser.errors


async def test_script_in_an_argument_is_shown_as_text_and_never_runs(tmp_path: Path, browser: Page) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    trust = TrustSettings(rules=(TrustRule("mcp:mini:echo", action="ask"),), approval_timeout_s=60)
    evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    async with admin_running(attrs.evolve(config, trust=trust), tmp_path / "state") as api:
        with trio.fail_after(60):
            ops = Http(api.url, OPS)
            sid = await ops.session()
            async with trio.open_nursery() as nursery:

                async def echo() -> None:
                    turn = (await ops.turn(sid))["turn_id"]
                    await ops.call(sid, turn, "mini_echo", {"text": evil})

                nursery.start_soon(echo)
                while not (await ops.request("GET", "/v1/approvals")).json()["approvals"]:  # noqa: ASYNC110 - the API's own list
                    await trio.sleep(0.05)
                await browser.goto(f"{api.url}/ui")  # rendered with the pending call's arguments
                await browser.fill('input[name="token"]', OPS)
                await browser.click('button[type="submit"]')
                await browser.wait_for_selector("tr[data-approval] code")
                shown = await browser.text("tr[data-approval] code")
                assert (
                    "<script>window.pwned=2</script>" in shown and "<img src=x onerror=" in shown
                )  # as text
                assert await browser.evaluate("window.pwned === undefined")
                await browser.click('tr[data-approval] button[data-act="deny"]')
            assert await browser.evaluate("window.pwned === undefined")


async def test_a_hung_call_is_cancelled_from_the_page(tmp_path: Path, browser: Page) -> None:
    async with admin_running(config_of(mini_spec("mini"), tokens=TOKENS), tmp_path / "state") as api:
        with trio.fail_after(60):
            alice = Http(api.url, ALICE)
            sid = await alice.session()
            async with trio.open_nursery() as nursery:
                answered: list[Any] = []

                async def hang() -> None:
                    turn = (await alice.turn(sid))["turn_id"]
                    answered.append(await alice.call(sid, turn, "mini_sleep", {"seconds": 120}))

                nursery.start_soon(hang)
                ops = Http(api.url, OPS)
                while not (await ops.request("GET", "/v1/calls")).json()["calls"]:  # noqa: ASYNC110 - the API's own list
                    await trio.sleep(0.05)
                await browser.goto(f"{api.url}/ui")
                await browser.fill('input[name="token"]', OPS)  # the operator cancels alice's call
                await browser.click('button[type="submit"]')
                await browser.click('tr[data-call] button[data-act="cancel"]')
            reply = answered[0]
            assert reply.json()["ok"] is False and reply.json()["error"]["code"] == "cancelled", reply
            await browser.wait_for_selector("tr[data-call]", state="detached")
