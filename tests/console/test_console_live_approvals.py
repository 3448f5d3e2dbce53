"""A live approval row in a real headless chromium: the page was loaded before the call
asked, so the row comes from the ``approval`` event, which carries no arguments; the
script reads them once from ``/ui/fragments/approvals`` and shows them as the trust rule
saw them, as text: script in an argument never runs. The calls in flight follow the
same events: the waiting call appears (``/ui/fragments/calls``, read on the
``approval`` event) and goes when it ends (its ``call`` event)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import trio

from supervisor.settings.model import TrustRule, TrustSettings
from tests.console.test_console_http import OPS, TOKENS
from tests.support.admin import ALICE, Http, admin_running, config_of, mini_spec, until
from tests.support.browser import Page

ARGUMENTS = "tr[data-approval] td:nth-child(3) code"


async def test_a_live_approval_row_shows_its_arguments_as_text(tmp_path: Path, browser: Page) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    trust = TrustSettings(rules=(TrustRule("mcp:mini:echo", action="ask"),), approval_timeout_s=60)
    evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    async with admin_running(attrs.evolve(config, trust=trust), tmp_path / "state") as api:
        with trio.fail_after(60):
            listening = api.sup.events.subscribers
            await browser.goto(f"{api.url}/ui")
            await browser.fill('input[name="token"]', OPS)
            await browser.click('button[type="submit"]')
            await browser.wait_for_text('tr[data-server="mini"] td.state', "steady")
            await until(lambda: api.sup.events.subscribers > listening)  # its event stream is open
            await browser.requested("/ui/fragments/servers")  # read once as the stream opened
            loaded = len(browser.requests)
            alice = Http(api.url, ALICE)
            sid = await alice.session()
            async with trio.open_nursery() as nursery:
                answered: list[Any] = []

                async def echo() -> None:
                    turn = (await alice.turn(sid))["turn_id"]
                    answered.append(await alice.call(sid, turn, "mini_echo", {"text": evil}))

                nursery.start_soon(echo)
                await browser.wait_for_text(ARGUMENTS, "window.pwned=2")
                assert await browser.text(ARGUMENTS) == json.dumps({"text": evil}, sort_keys=True)
                await browser.wait_for_text("#calls tr[data-call] td:nth-child(3)", "mini_echo")
                assert await browser.text("#calls tr[data-call] td:nth-child(4)") == "alice"
                await browser.screenshot("live-approval")
                assert await browser.evaluate("window.pwned === undefined")
                since = sorted(
                    (r.resource_type, r.url.removeprefix(api.url)) for r in browser.requests[loaded:]
                )
                # No reload, no polling: one read of each, on the approval's event.
                assert since == [("fetch", "/ui/fragments/approvals"), ("fetch", "/ui/fragments/calls")]
                await browser.click('tr[data-approval] button[data-act="deny"]')
            assert answered[0].json()["ok"] is False, answered[0]
            await browser.wait_for_selector("tr[data-approval]", state="detached")
            await browser.wait_for_selector("#calls tr[data-call]", state="detached")  # its call event
            assert await browser.evaluate("window.pwned === undefined")
            assert not [e for e in browser.errors if "favicon" not in e], browser.errors
