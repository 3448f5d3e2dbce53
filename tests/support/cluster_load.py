"""A load of gateway clients of both eras through a load balancer, with every call's
fate kept: when it started and ended, and whether it was answered ``ok``. Each call's
text is unique, so the backend's calls log, the audit rows and the clients' answers
can be matched call by call. Used by the cluster's end-to-end test and its benchmark."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs
import trio

from actors.protocol.messages import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from supervisor.store import hash_arguments
from tests.support.admin import Http
from tests.support.gateway_http import McpHttp, request

NEW_ERA = "2026-07-28"
ECHO = "mini_echo"


@attrs.define
class Outcome:
    """One call as its client saw it."""

    text: str
    client: str
    started: float
    ended: float
    ok: bool
    detail: str = ""


@attrs.define
class Load:
    """Every call's outcome; ``running`` until ``stop`` is set."""

    front: str
    outcomes: list[Outcome] = attrs.field(factory=list)
    stop: trio.Event = attrs.field(factory=trio.Event)
    pause_s: float = 0.0
    """Between a client's calls (0: as fast as answers come)."""

    def ok(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.ok]

    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def of(self, client: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.client == client]

    async def _record(self, text: str, client: str, call: Callable[[], Any]) -> bool:
        started = trio.current_time()
        try:
            ok, detail = await call()
        except (OSError, trio.BrokenResourceError, Exception) as exc:  # a dropped connection
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        self.outcomes.append(Outcome(text, client, started, trio.current_time(), ok, detail))
        return ok

    async def session_client(self, mcp: McpHttp, name: str) -> None:
        """A handshake-era session calling ``mini_echo`` until ``stop``."""
        for n in itertools.count():
            if self.stop.is_set():
                return

            async def echo(text: str = f"{name}-{n}", n: int = n) -> tuple[bool, str]:
                reply = await mcp.post(
                    request(n + 1000, "tools/call", {"name": ECHO, "arguments": {"text": text}})
                )
                return _echoed(reply, text)

            await self._record(f"{name}-{n}", name, echo)
            await trio.sleep(self.pause_s)

    async def new_era_client(self, name: str) -> None:
        """A 2026-07-28 client: no session, every request round-robin."""
        http = Http(self.front)
        for n in itertools.count():
            if self.stop.is_set():
                return
            text = f"{name}-{n}"

            async def echo(text: str = text, n: int = n) -> tuple[bool, str]:
                message = new_era_call(n, ECHO, {"text": text})
                headers = {"MCP-Protocol-Version": NEW_ERA, "Mcp-Method": "tools/call", "Mcp-Name": ECHO}
                headers["Accept"] = "application/json, text/event-stream"
                reply = await http.request("POST", "/mcp", json=message, headers=headers)
                return _echoed(reply, text)

            await self._record(text, name, echo)
            await trio.sleep(self.pause_s)


def new_era_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {META_PROTOCOL_VERSION: NEW_ERA, META_CLIENT_CAPABILITIES: {}}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    }


def _echoed(reply: Any, text: str) -> tuple[bool, str]:
    if reply.status != 200:
        return False, f"HTTP {reply.status}: {reply.body[:300]!r}"
    body = reply.body.decode(errors="replace")
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        ok = f'"text":"{text}"' in body.replace(" ", "") and '"isError":false' in body.replace(" ", "")
    else:
        result = reply.json().get("result") or {}
        ok = result.get("isError") is False and result.get("content", [{}])[0].get("text") == text
    return ok, "" if ok else body[:300]


def digest(text: str) -> str:
    """The audit row's arguments hash of an echo of ``text``."""
    return hash_arguments({"text": text})[0]
