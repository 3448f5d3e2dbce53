"""The audit search in a real headless chromium (Debian's, through Playwright): the
operator finds a call made through the admin API by its tool and opens its details;
then a tenant, signed in on the same console, sees its own audit rows, sessions, calls
in flight and approvals and none of another tenant's, and script in a search it typed
is shown as text and never runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from supervisor.settings.model import Role, TokenGrant, TrustRule, TrustSettings
from tests.support.admin import ALICE, BOB, Http, admin_running, config_of, mini_spec
from tests.support.browser import Page

OPS = "ops-audit-browser-0123456789"
TOKENS = {OPS: TokenGrant("ops", Role.OPERATOR), ALICE: "alice", BOB: "bob"}
ROW = "tr.audit-row"


async def cells(browser: Page, selector: str) -> list[str]:
    """The text of every element matching ``selector``, in page order."""
    found: list[str] = await browser.evaluate(
        "(s) => [...document.querySelectorAll(s)].map((e) => e.textContent)", selector
    )
    return found


async def column(browser: Page, rows: str, index: int) -> list[str]:
    """The ``index``-th cell (from 1) of each row matching ``rows``."""
    return await cells(browser, f"{rows} td:nth-child({index})")


async def sign_in(browser: Page, url: str, token: str) -> None:
    await browser.goto(f"{url}/ui")
    await browser.fill('input[name="token"]', token)
    await browser.click('button[type="submit"]')
    await browser.wait_for_selector("#servers")


async def test_the_audit_search_in_a_browser_and_a_tenant_sees_only_its_own(
    tmp_path: Path, browser: Page
) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    trust = TrustSettings(rules=(TrustRule("mcp:mini:add", action="ask"),), approval_timeout_s=60)
    async with admin_running(attrs.evolve(config, trust=trust), tmp_path / "state") as api:
        with trio.fail_after(90):
            alice, bob, ops = Http(api.url, ALICE), Http(api.url, BOB), Http(api.url, OPS)
            sids = {"alice": await alice.session(), "bob": await bob.session()}
            turns = {
                who: (await http.turn(sids[who]))["turn_id"] for who, http in (("alice", alice), ("bob", bob))
            }
            for who, http in (("alice", alice), ("bob", bob)):  # one finished call each: an audit row
                assert (await http.call(sids[who], turns[who], "mini_echo", {"text": who})).json()["ok"]
            await api.sup.store.flush()

            async with trio.open_nursery() as nursery:
                for who, http in (("alice", alice), ("bob", bob)):  # each: a call in flight, an approval
                    for tool, arguments in (("mini_sleep", {"seconds": 120}), ("mini_add", {"a": 1, "b": 2})):

                        async def make(
                            http: Http = http, who: str = who, tool: str = tool, a: Any = arguments
                        ) -> None:
                            await http.call(sids[who], turns[who], tool, a)

                        nursery.start_soon(make)
                while len((await ops.request("GET", "/v1/calls")).json()["calls"]) < 4:  # noqa: ASYNC110 - the API's own list
                    await trio.sleep(0.05)

                # The operator: the audit page from the main page, searched by tool, a row's details.
                await sign_in(browser, api.url, OPS)
                await browser.click("#nav-audit")
                await browser.wait_for_selector("#audit-search")
                await browser.fill('#audit-search input[name="tool"]', "mini_echo")
                await browser.click('#audit-search button[type="submit"]')
                await browser.wait_for_selector(f"{ROW} td.tool")
                assert await cells(browser, f"{ROW} td.tool") == ["mini_echo", "mini_echo"]
                assert await cells(browser, f"{ROW} td.tenant") == ["bob", "alice"]  # newest first
                assert not await browser.evaluate(f"document.querySelector('{ROW} details').open")
                await browser.click(f"{ROW}:nth-child(2) summary")  # alice's call
                await browser.wait_for_selector(f"{ROW}:nth-child(2) details dd.duration_ms")
                [outcome] = await cells(browser, f"{ROW}:nth-child(2) details dd.outcome")
                [duration] = await cells(browser, f"{ROW}:nth-child(2) details dd.duration_ms")
                assert outcome == "ok" and int(duration) >= 0
                [digest] = await cells(browser, f"{ROW}:nth-child(2) details dd.args_sha256")
                assert len(digest) == 64
                await browser.screenshot("audit")
                await browser.click("#nav-console")  # and back
                await browser.wait_for_selector("#servers")
                await browser.click('#logout button[type="submit"]')
                await browser.wait_for_selector('input[name="token"]')

                # A tenant: its own rows in each table, none of the other tenant's.
                await sign_in(browser, api.url, ALICE)
                await browser.wait_for_selector("tr[data-approval]")
                assert set(await column(browser, "tr[data-call]", 4)) == {"alice"}
                assert len(await column(browser, "tr[data-call]", 4)) == 2  # her sleep, her add
                assert await column(browser, "tr[data-approval]", 5) == ["alice"]
                listed = " ".join(await cells(browser, "#sessions td"))
                assert sids["alice"] in listed and sids["bob"] not in listed
                await browser.click("#nav-audit")
                await browser.wait_for_selector(f"{ROW} td.tenant")
                shown = await cells(browser, f"{ROW} td.tenant")
                assert shown and set(shown) == {"alice"}
                assert sids["bob"] not in await browser.text("main")
                await browser.screenshot("audit-tenant")

                # Script in a search it typed comes back as text in the API's refusal.
                evil = '<img src=x onerror="window.pwned=1">'
                await browser.fill('#audit-search input[name="tenant"]', evil)
                await browser.click('#audit-search button[type="submit"]')
                await browser.wait_for_selector("p.problem")
                problem = await browser.text("p.problem")
                assert "refused (400)" in problem and evil in problem, problem
                assert await browser.evaluate("window.pwned === undefined")
                nursery.cancel_scope.cancel()
            assert not [e for e in browser.errors if "favicon" not in e and "400" not in e], browser.errors
