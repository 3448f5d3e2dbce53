"""The browser harness (``tests/support/browser.py``) on a page served by the test: a real
chromium loads it, runs its script, takes its picture, records its requests, and goes."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.browser import Page, headless_page, missing, users_of
from tests.support.static_site import static_site

SITE = Path(__file__).parent / "site"
PNG = b"\x89PNG\r\n\x1a\n"


async def test_a_served_page_runs_its_script_file_and_is_photographed(browser: Page) -> None:
    async with static_site(SITE) as site:
        await browser.goto(site.url + "/")
        await browser.wait_for_text("#status", "script ran")
        await browser.wait_for_text("#event", "event: hello")
        shot = await browser.screenshot("loaded")
    assert shot == browser.screenshots / "loaded.png"
    assert shot.read_bytes().startswith(PNG)
    assert shot.stat().st_size > 1000
    assert browser.errors == []


async def test_the_pages_policy_leaves_an_injected_inline_script_inert(browser: Page) -> None:
    async with static_site(SITE) as site:
        await browser.goto(site.url + "/")
        await browser.wait_for_text("#status", "script ran")
        await browser.evaluate(
            """() => {
                const s = document.createElement("script");
                s.textContent = "document.title = 'injected'";
                document.body.append(s);
            }"""
        )
        await browser.idle(0.2)
        assert await browser.evaluate("document.title") == "harness"
    assert any("Content Security Policy" in error for error in browser.errors), browser.errors


async def test_a_dialog_a_script_opens_is_recorded_and_dismissed(browser: Page) -> None:
    async with static_site(SITE) as site:
        await browser.goto(site.url + "/")
        await browser.wait_for_text("#status", "script ran")
        await browser.evaluate("() => { setTimeout(() => alert('opened'), 0); }")
        await browser.idle(0.3)
        assert await browser.evaluate("1 + 1") == 2  # dismissed: the page goes on
    assert "dialog: alert opened" in browser.errors, browser.errors


async def test_the_network_log_holds_every_request_over_a_window(browser: Page) -> None:
    async with static_site(SITE) as site:
        await browser.goto(site.url + "/")
        await browser.wait_for_text("#event", "event: hello")
        loaded = [(urlsplit(r.url).path, r.resource_type) for r in browser.requests]
        assert loaded == [("/", "document"), ("/app.js", "script"), ("/events", "eventsource")]

        assert await browser.idle(1.0) == []  # only the open event stream: no request

        await browser.click("#poll")
        busy = await browser.idle(1.0)
        assert [(urlsplit(r.url).path, r.resource_type) for r in busy] == [("/ping.txt", "fetch")] * 5
        assert await browser.text("#polled") == "5"
    # what the server saw, the browser's log holds, in the same order
    assert site.paths == [urlsplit(r.url).path for r in browser.requests]


async def test_closing_ends_chromium_and_removes_its_profile(tmp_path: Path) -> None:
    async with headless_page(tmp_path) as page:
        profile = page.profile
        assert profile.is_dir()
        assert users_of(profile)  # chromium runs with this profile
    assert users_of(profile) == []
    assert not profile.exists()


def test_without_chromium_the_reason_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHROMIUM", "no-such-chromium")
    assert missing() == (
        "Debian's chromium is not installed: run .ci/setup as root (it runs apt-get install chromium)"
    )
