"""The operator's console (issue 36): the page's server time under load, and whether it
keeps up with 50 events a second.

    python benchmarks/bench_console.py [--rounds 5] [--only page events] [--sessions 1000]
        [--calls 200] [--requests 20] [--rate 50] [--seconds 10] [--no-browser] [--json FILE]

* ``page``: two ``serve`` processes of this checkout (``python -m supervisor.cli serve``),
  each with one ``mini_server.py``: ``empty`` (nothing open) and ``loaded`` (``--sessions``
  sessions of 50 tenants: half admin-API sessions, the rest ``/mcp`` sessions, 9 in 10
  of the handshake era and one 2026-07-28 tenant state per tenant; and ``--calls`` tool
  calls hung in ``mini_sleep``, listed by ``GET /v1/calls``). Round by round, interleaved
  (benchmarks/interleave.py), ``GET /ui`` signed in as the operator, ``--requests``
  times one after another: p50 and max ms from request to the last byte, over loopback
  (the client in this process, the server in its own). The goal is 100 ms.
* ``events``: a supervisor and its admin server in this process; each round publishes
  ``--rate`` events a second for ``--seconds`` on its event bus (state events of the
  ``bench`` server, and approval events, alternately), while ``/ui/events`` is read by
  an HTTP client as the operator and by the console's own page in a headless chromium
  (Debian's, through Playwright; ``--no-browser`` leaves it out), which has a
  MutationObserver note when each event's change lands in the page. Per round: events
  lost at the relay and in the page, and the lag from publishing to each (p50, p99 ms).

Printed: medians of the rounds with min-max, and the 1-minute load average at the start
and the end of each section.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import interleave
import trio
from _common import quantiles

from actors.protocol.messages import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from supervisor.settings.model import Role, TokenGrant
from tests.support.admin import Http, admin_running, config_of, mini_spec
from tests.support.gateway_http import McpHttp
from tests.support.http_processes import free_port, listening_process
from tests.support.paths import SERVERS

OPS = "bench-console-operator-0123456789"
TENANTS = 50
HUNG_S = 3600


def _token(n: int) -> str:
    return f"bench-console-tenant-{n:02d}-0123456789"


async def sign_in(http: Http) -> str:
    """The console cookie of an operator's sign-in (the form, as a browser posts it)."""
    headers = {"Origin": f"http://{http.authority}", "Content-Type": "application/x-www-form-urlencoded"}
    answer = await http.request("POST", "/ui/login", body=urlencode({"token": OPS}).encode(), headers=headers)
    assert answer.status == 303, answer
    return answer.headers["set-cookie"].split(";")[0]


# ----------------------------------------------------------------------- page


def _config(folder: Path, name: str) -> Path:
    tokens: dict[str, Any] = {OPS: {"tenant": "ops", "role": "operator"}}
    tokens |= {_token(n): f"t{n:02d}" for n in range(TENANTS)}
    mini = {"command": [sys.executable, str(SERVERS / "mini_server.py")], "trusted": True, "start": "eager",
            "call_timeout_ms": HUNG_S * 1000, "max_call_ms": HUNG_S * 1000}  # fmt: skip
    config = {
        "servers": {"mini": mini},
        "admin": {"tokens": tokens},
        "gateway": {"max_sessions_per_tenant": 1000},
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


@asynccontextmanager
async def _serve(folder: Path, name: str) -> AsyncIterator[str]:
    port, state = free_port(), folder / f"{name}-state"
    argv = [sys.executable, "-m", "supervisor.cli", "serve", "--config", str(_config(folder, name))]
    argv += ["--bind", f"127.0.0.1:{port}", "--state-dir", str(state)]
    async with listening_process(argv, port, f"serve ({name})"):
        url = f"http://127.0.0.1:{port}"
        with trio.fail_after(30):  # until its server is steady
            while (await Http(url, OPS).request("GET", "/v1/servers/mini")).json().get("state") != "steady":  # noqa: ASYNC110 - another process
                await trio.sleep(0.05)
        yield url


def _new_era_list(n: int) -> dict[str, Any]:
    meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {"_meta": meta}}


async def _load(
    url: str, sessions: int, calls: int, nursery: trio.Nursery
) -> tuple[dict[str, int], trio.CancelScope]:
    """Open ``sessions`` sessions and hang ``calls`` calls (in ``nursery``); the calls'
    cancel scope."""
    admin = sessions // 2
    new_era = min(TENANTS, sessions - admin)
    handshake = sessions - admin - new_era
    limit = trio.CapacityLimiter(16)
    opened: list[tuple[Http, str]] = []

    async def one(kind: str, n: int) -> None:
        async with limit:
            http = Http(url, _token(n % TENANTS))
            if kind == "admin":
                opened.append((http, await http.session()))
            elif kind == "handshake":
                await McpHttp(http).open()
            else:
                headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list",
                           "Accept": "application/json, text/event-stream"}  # fmt: skip
                reply = await http.request("POST", "/mcp", json=_new_era_list(n), headers=headers)
                assert reply.status == 200, reply

    async with trio.open_nursery() as opening:
        for kind, count in (("admin", admin), ("handshake", handshake), ("new era", new_era)):
            for n in range(count):
                opening.start_soon(one, kind, n)

    async def hang(http: Http, sid: str) -> None:
        turn = (await http.turn(sid))["turn_id"]
        await http.call(sid, turn, "mini_sleep", {"seconds": HUNG_S})

    async def hang_all(*, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        async with trio.open_nursery() as calling:
            for http, sid in opened[:calls]:
                calling.start_soon(hang, http, sid)
            task_status.started(calling.cancel_scope)

    stop: trio.CancelScope = await nursery.start(hang_all)
    ops = Http(url, OPS)
    with trio.fail_after(60):
        while len((await ops.request("GET", "/v1/calls")).json()["calls"]) < calls:  # noqa: ASYNC110 - the API's own list
            await trio.sleep(0.1)
    listed = {path: len((await ops.request("GET", path)).json()["sessions"])
              for path in ("/v1/sessions", "/v1/gateway/sessions")}  # fmt: skip
    return {"sessions": sum(listed.values()), "calls": calls}, stop


async def _page_times(url: str, cookie: str, requests: int) -> dict[str, Any]:
    http = Http(url)
    times, size = [], 0
    for _ in range(requests):
        begin = time.perf_counter()
        answer = await http.request("GET", "/ui", headers={"Cookie": cookie})
        times.append((time.perf_counter() - begin) * 1000)
        assert answer.status == 200, answer
        size = len(answer.body)
    q = quantiles(times)
    return {"p50_ms": q["p50"], "max_ms": max(times), "page_kb": size / 1024}


async def page_section(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    async with trio.open_nursery() as hung, AsyncExitStack() as stack:
        urls = {name: await stack.enter_async_context(_serve(folder, name)) for name in ("empty", "loaded")}
        loaded, stop = await _load(urls["loaded"], args.sessions, args.calls, hung)
        print(
            f"loaded: {loaded['sessions']} sessions listed, {loaded['calls']} calls in flight",
            file=sys.stderr,
        )
        cookies = {name: await sign_in(Http(url)) for name, url in urls.items()}

        def measure(name: str) -> interleave.Measure:
            return lambda index: trio.from_thread.run(_page_times, urls[name], cookies[name], args.requests)

        result = await trio.to_thread.run_sync(
            interleave.run, "page", {n: measure(n) for n in urls}, args.rounds
        )
        result["load"] = loaded
        stop.cancel()  # the hung calls end before their server does
    return result


# --------------------------------------------------------------------- events

OBSERVE = """() => {
  window.applied = [];
  const note = (key) => window.applied.push([key, Date.now()]);
  const retry = document.querySelector('tr[data-server="bench"] td.retry');
  new MutationObserver(() => note("s" + retry.textContent)).observe(retry, { childList: true });
  new MutationObserver((records) => {
    for (const r of records) {
      for (const n of r.addedNodes) if (n.dataset && n.dataset.approval) note(n.dataset.approval);
    }
  }).observe(document.querySelector("#approvals tbody"), { childList: true });
}"""


def _event(seq: int) -> tuple[str, dict[str, Any]]:
    """The ``seq``-th event and its key: a state event (its seq as the retry delay) or a
    pending approval (its seq in its id), alternately."""
    if seq % 2 == 0:
        event = {"type": "state", "server": "bench", "state": "backoff", "prev": "steady", "phase": None,
                 "next_retry_in_s": seq, "reason": f"bench {seq}"}  # fmt: skip
        return f"s{seq}", event
    event = {"type": "approval", "status": "pending", "id": f"a{seq}", "tool": "bench_echo",
             "server": "bench", "permission": "mcp:bench:echo", "reason": "bench", "session": "bench",
             "tenant": "ops"}  # fmt: skip
    return f"a{seq}", event


def _lags(sent: dict[str, float], seen: dict[str, float], prefix: str) -> dict[str, Any]:
    lags = [(seen[key] - at) * 1000 for key, at in sent.items() if key in seen]
    q = quantiles(lags) if lags else {"p50": float("nan"), "p99": float("nan")}
    return {
        f"{prefix}_lost": len(sent) - len(lags),
        f"{prefix}_p50_ms": q["p50"],
        f"{prefix}_p99_ms": q["p99"],
    }


async def _until_both_hear(sup: Any, events: Any, page: Any) -> None:
    """Publish a probe state event every 0.2 s until the relay reader and the page (if
    any) have both applied one: their streams are live. Then the page forgets it."""
    heard_relay = heard_page = False
    with trio.fail_after(20):
        for n in itertools.count():
            probe = f"probe{n}"
            sup.events.publish(
                {"type": "state", "server": "bench", "state": "steady", "next_retry_in_s": probe}
            )
            with trio.move_on_after(0.2):
                while not heard_relay:
                    item = await events.next()
                    heard_relay = item is not None and item.event == "state" and "probe" in str(item.data)
            if page is not None and not heard_page:
                heard_page = any("probe" in key for key, _ in await page.evaluate("window.applied"))
            if heard_relay and (page is None or heard_page):
                break
    if page is not None:
        await page.evaluate("window.applied = []")


async def _events_round(sup: Any, url: str, page: Any, args: argparse.Namespace, seqs: Any) -> dict[str, Any]:
    http = Http(url)
    cookie = await sign_in(http)
    if page is not None:  # a fresh page each round (the last round's approval rows gone), observed
        await page.goto(f"{url}/ui")
        await page.wait_for_selector('tr[data-server="bench"]')
        await page.evaluate(OBSERVE)
    sent: dict[str, float] = {}
    relayed: dict[str, float] = {}
    count = int(args.rate * args.seconds)
    async with http.stream("GET", "/ui/events", headers={"Cookie": cookie}) as events:
        await _until_both_hear(sup, events, page)

        async def publish() -> None:
            start = trio.current_time()
            for n in range(count):
                await trio.sleep_until(start + n / args.rate)
                key, event = _event(next(seqs))
                sent[key] = time.time()
                sup.events.publish(event)

        async def read() -> None:
            while len(relayed) < count and (item := await events.next()) is not None:
                data = item.data if isinstance(item.data, dict) else {}
                if item.event in ("state", "approval"):
                    key = f"s{data.get('next_retry_in_s')}" if item.event == "state" else str(data.get("id"))
                    if key in sent:  # not a late probe
                        relayed.setdefault(key, time.time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(publish)
            with trio.move_on_after(args.seconds + 5):
                await read()
    result = {"published": count, "achieved_rate": count / args.seconds, **_lags(sent, relayed, "relay")}
    if page is not None:
        await trio.sleep(1.0)  # what is late by more than a second counts as lost
        applied = {key: at / 1000 for key, at in await page.evaluate("window.applied")}
        result |= _lags(sent, applied, "page")
    return result


async def events_section(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    config = config_of(mini_spec("bench"), tokens={OPS: TokenGrant("ops", Role.OPERATOR)})
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(admin_running(config, folder / "events-state"))
        page = None
        if not args.no_browser:
            from tests.support.browser import headless_page, missing

            if (why := missing()) is not None:
                print(f"no browser: {why}", file=sys.stderr)
            else:
                page = await stack.enter_async_context(headless_page(folder / "shots"))
                await page.goto(f"{api.url}/ui")
                await page.fill('input[name="token"]', OPS)
                await page.click('button[type="submit"]')
        seqs = itertools.count()

        def measure(index: int) -> dict[str, Any]:
            return trio.from_thread.run(_events_round, api.sup, api.url, page, args, seqs)

        contender = f"{args.rate:g} events/s"
        return await trio.to_thread.run_sync(interleave.run, "events", {contender: measure}, args.rounds)


# ---------------------------------------------------------------------- report


def _print(section: str, result: dict[str, Any], keys: tuple[str, ...], fmt: Callable[[float], str]) -> None:
    marker = result["interleaved"]
    print(f"\n{section}: {marker['rounds']} rounds, interleaved; load average {marker['load_start']:.2f} "
          f"at start, {marker['load_end']:.2f} at end")  # fmt: skip
    print("| | " + " | ".join(f"{k} (min-max)" for k in keys) + " |\n" + "|---" * (len(keys) + 1) + "|")
    for name, measured in result["contenders"].items():
        cells = [measured["metrics"].get(k) for k in keys]
        shown = " | ".join(
            "-" if c is None else f"{fmt(c['median'])} ({fmt(c['min'])}-{fmt(c['max'])})" for c in cells
        )
        print(f"| {name} | {shown} |")
        for error in measured["errors"]:
            print(f"  error: {error}")


async def _main(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if "page" in args.only:
        result["page"] = await page_section(args, folder)
    if "events" in args.only:
        result["events"] = await events_section(args, folder)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=("page", "events"), default=["page", "events"])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20, help="GET /ui per contender per round")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as folder:
        result = trio.run(_main, args, Path(folder))
    if "page" in result:
        load = result["page"]["load"]
        print(
            f"\nGET /ui as the operator; loaded: {load['sessions']} sessions, {load['calls']} calls in flight"
        )
        _print("page", result["page"], ("p50_ms", "max_ms", "page_kb"), lambda v: f"{v:.1f}")
    if "events" in result:
        keys = ("achieved_rate", "relay_lost", "relay_p50_ms", "relay_p99_ms", "page_lost", "page_p50_ms",
                "page_p99_ms")  # fmt: skip
        _print("events", result["events"], keys, lambda v: f"{v:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
