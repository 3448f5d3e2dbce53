"""A real headless browser for Trio tests: Debian's chromium driven by Playwright.

Nothing is downloaded but packages: ``.ci/setup`` installs Debian's ``chromium`` with apt-get and
the ``playwright`` Python package (the dev extra); ``playwright install`` is never run. Playwright
is pointed at the Debian binary (``executable_path``), headless, with ``--no-sandbox`` when running
as root (chromium's sandbox refuses root). Without chromium or playwright, ``headless_page``
skips the test and says which is missing and how to get it.

Why a thread of its own: the suite runs pytest-trio, and Playwright's async API needs asyncio.
Its sync API runs an event loop of its own on greenlets, and its objects may be used only from
the thread that started it, so each browser gets one dedicated thread (a one-worker executor)
that starts Playwright, makes every call and stops it. ``Page``'s small async methods hand work
to that thread and wait for it in a Trio worker thread, so a Trio test awaits them as usual.

One browser per test, not per worker: it starts and stops in well under a second, keeps every
test's profile (cookies, storage) its own, and lets the after-test leak check in
``tests/conftest.py`` see no survivor. Its profile is a temporary folder, removed after; closing
also kills any chromium process still using that folder, so nothing outlives the test.

The network log (``Page.requests``) holds every request the page made, stamped when Playwright
reported it. The sync API reports events only while a call runs on the browser thread, so a
window of time is watched by ``Page.idle``, which keeps that thread waiting inside Playwright
(``wait_for_timeout``) for the window and returns the requests made in it.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import pytest
import trio

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Playwright
    from playwright.sync_api import Dialog as SyncDialog
    from playwright.sync_api import Page as SyncPage
    from playwright.sync_api import Request as SyncRequest

T = TypeVar("T")
ElementState = Literal["attached", "detached", "visible", "hidden"]
TIMEOUT_S = 10.0  # any one step: a page load, a selector to appear, a click
CLOSE_S = 10.0


def chromium_path() -> str | None:
    """Debian's chromium (``/usr/bin/chromium``), or ``CHROMIUM`` if set, when it is there."""
    return shutil.which(os.environ.get("CHROMIUM", "chromium"))


def missing() -> str | None:
    """Why no browser test can run here, or None when chromium and playwright are both there."""
    if chromium_path() is None:
        return "Debian's chromium is not installed: run .ci/setup as root (it runs apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed: run .ci/setup (the dev extra has it)"
    return None


@attrs.frozen
class Request:
    """One request the page made: when (``time.monotonic``), how, to where, for what."""

    at: float
    method: str
    url: str
    resource_type: str  # Playwright's: document, script, fetch, eventsource, xhr, image...


@attrs.define
class Page:
    """A headless page, driven from Trio. ``requests`` and ``errors`` (uncaught script
    errors and console errors, CSP refusals among them, and any dialog a script opened,
    dismissed) fill in as the page runs."""

    _sync: SyncPage
    _thread: ThreadPoolExecutor
    screenshots: Path
    profile: Path  # chromium's user data folder, removed on close
    requests: list[Request] = attrs.field(factory=list)
    errors: list[str] = attrs.field(factory=list)

    async def _run(self, call: Callable[[], T]) -> T:
        done = self._thread.submit(call)
        return await trio.to_thread.run_sync(done.result, abandon_on_cancel=True)

    async def goto(self, url: str) -> None:
        """Load ``url`` and wait for its ``load`` event; a status >= 400 is an error."""
        response = await self._run(lambda: self._sync.goto(url))
        if response is not None and response.status >= 400:
            raise AssertionError(f"{url} answered {response.status}")

    async def click(self, selector: str) -> None:
        await self._run(lambda: self._sync.click(selector))

    async def fill(self, selector: str, value: str) -> None:
        await self._run(lambda: self._sync.fill(selector, value))

    async def wait_for_selector(self, selector: str, *, state: ElementState = "visible") -> None:
        """Until an element matching ``selector`` is in ``state``."""
        await self._run(lambda: self._sync.wait_for_selector(selector, state=state))

    async def wait_for_text(self, selector: str, text: str) -> None:
        """Until an element matching ``selector`` contains ``text``."""
        await self._run(lambda: self._sync.locator(selector, has_text=text).first.wait_for())

    async def text(self, selector: str) -> str:
        return await self._run(lambda: self._sync.inner_text(selector))

    async def evaluate(self, expression: str, arg: Any = None) -> Any:
        """Run ``expression`` (a JavaScript function or expression) in the page; its result.
        Playwright evaluates through the DevTools protocol, so the page's CSP does not apply."""
        return await self._run(lambda: self._sync.evaluate(expression, arg))

    async def screenshot(self, name: str) -> Path:
        """Save the page as ``<screenshots>/<name>.png`` (the folder is made); its path."""
        path = self.screenshots / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        await self._run(lambda: self._sync.screenshot(path=str(path), full_page=True))
        return path

    async def requested(self, path: str, after: int = 0, timeout_s: float = 10.0) -> None:
        """Until the page has asked for ``path`` (the end of a URL), among its requests
        from index ``after`` on (``len(requests)`` before the step that makes it)."""
        with trio.fail_after(timeout_s):
            while not any(r.url.endswith(path) for r in self.requests[after:]):  # noqa: ASYNC110 - the page's own thread fills it
                await trio.sleep(0.02)

    async def idle(self, seconds: float) -> list[Request]:
        """Watch the page for ``seconds`` doing nothing else; the requests it made meanwhile."""
        start = time.monotonic()
        await self._run(lambda: self._sync.wait_for_timeout(seconds * 1000))
        return [request for request in self.requests if request.at >= start]


def _launch(playwright: Playwright, profile: Path) -> BrowserContext:
    args = ["--disable-dev-shm-usage", "--no-first-run"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=chromium_path(), headless=True, args=args
    )


def _watch(page: Page) -> None:
    """Record what the page does, on the browser thread (Playwright calls these there)."""

    def request(made: SyncRequest) -> None:
        page.requests.append(Request(time.monotonic(), made.method, made.url, made.resource_type))

    def dialog(opened: SyncDialog) -> None:  # a script's alert(), confirm()...: recorded, dismissed
        page.errors.append(f"dialog: {opened.type} {opened.message}")
        opened.dismiss()

    page._sync.on("request", request)
    page._sync.on("pageerror", lambda error: page.errors.append(f"uncaught: {error}"))
    page._sync.on("dialog", dialog)
    page._sync.on(
        "console",
        lambda message: page.errors.append(f"console: {message.text}") if message.type == "error" else None,
    )


def users_of(profile: Path) -> list[int]:
    """Processes whose command line names ``profile``: chromium's, which outlive nothing."""
    needle = str(profile).encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError):
                if needle in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
    return found


@asynccontextmanager
async def headless_page(screenshots: Path) -> AsyncIterator[Page]:
    """A fresh headless chromium with one page, screenshots going to ``screenshots``;
    closed after, its processes gone and its profile removed. Skips when it cannot run."""
    if (reason := missing()) is not None:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="browser")
    profile = Path(tempfile.mkdtemp(prefix="chromium-profile-"))
    state: dict[str, Any] = {}

    def start() -> SyncPage:
        state["playwright"] = playwright = sync_playwright().start()
        state["context"] = context = _launch(playwright, profile)
        context.set_default_timeout(TIMEOUT_S * 1000)
        return context.pages[0] if context.pages else context.new_page()

    def stop() -> None:
        with suppress(Exception):
            if "context" in state:
                state["context"].close()
        if "playwright" in state:
            state["playwright"].stop()

    try:
        sync = await trio.to_thread.run_sync(thread.submit(start).result)
        page = Page(sync, thread, screenshots, profile)
        await trio.to_thread.run_sync(thread.submit(_watch, page).result)
        yield page
    finally:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(CLOSE_S):
                await trio.to_thread.run_sync(thread.submit(stop).result, abandon_on_cancel=True)
            for pid in users_of(profile):  # normally none: closing ended them
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            thread.shutdown(wait=False)
            shutil.rmtree(profile, ignore_errors=True)
