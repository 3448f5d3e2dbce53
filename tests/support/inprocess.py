"""A supervisor on a scripted fake server, with the admin app served in-process.

``running`` opens it with three tools: ``fake_echo``; ``fake_note``, which takes a
required string ``text`` and which a rule asks about; and ``fake_wipe``, which a rule
denies. It begins a turn of its own and one of an HTTP session, and yields
``Running``: the supervisor, the fake server, the turn, the Quart app (reach it with
``app.test_client()``, no socket) and the path that calls a tool in the HTTP
session's turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio
from quart_trio import QuartTrio

from actors.connection.states import State
from actors.spec import ServerSpec, Start
from supervisor import Supervisor
from supervisor.admin.app import create_app
from supervisor.admin.hosted import HostedSessions
from supervisor.calls.turns import Turn
from supervisor.sessions.approvals import Approver
from supervisor.settings.model import Config, StoreSettings, TrustRule, TrustSettings
from supervisor.store import AuditRow
from tests.support.fakes import FakeServer

HOST = {"Host": "127.0.0.1", "Content-Type": "application/json"}
TOOLS = [
    {"name": "echo", "description": "Echo the arguments", "inputSchema": {"type": "object"}},
    {
        "name": "note",
        "description": "Keep a note",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "wipe", "description": "Wipe everything", "inputSchema": {"type": "object"}},
]


@attrs.define
class Running:
    sup: Supervisor
    server: FakeServer
    turn: Turn
    app: QuartTrio
    calls_path: str

    async def rows(self) -> list[AuditRow]:
        await self.sup.store.flush()
        return await self.sup.store.read(lambda s: s.audit_rows(limit=1_000_000))

    async def post_call(self, body: bytes) -> tuple[int, Any]:
        reply = await self.app.test_client().post(self.calls_path, data=body, headers=HOST)
        return reply.status_code, orjson.loads(await reply.get_data())

    async def get(self, path: str) -> tuple[int, bytes]:
        reply = await self.app.test_client().get(path, headers=HOST)
        return reply.status_code, await reply.get_data()


@asynccontextmanager
async def running(
    tmp_path: Path, approver: Approver | None = None, store: StoreSettings | None = None
) -> AsyncIterator[Running]:
    """The supervisor, its fake server and the app, for the duration of the block
    (``store``: where its store is, else SQLite in ``tmp_path``)."""
    server = FakeServer(TOOLS)
    rules = (TrustRule("mcp:fake:wipe", "*", "deny"), TrustRule("mcp:fake:note", "*", "ask"))
    config = Config(
        servers=(ServerSpec(name="fake", command=("fake",), start=Start.EAGER, trusted=True),),
        trust=TrustSettings(rules=rules),
        store=store or StoreSettings(),
    )
    async with Supervisor.open(config, approver, state_dir=tmp_path, connector=server.connector) as sup:
        with trio.fail_after(30):
            await sup.router.cell.wait_until(
                lambda c: all(v.state is State.STEADY for v in c.servers.values())
            )
        hosted = HostedSessions(sup)
        async with sup.session() as session, trio.open_nursery() as nursery:
            await nursery.start(hosted.run)
            app = create_app(sup, hosted, bind_is_loopback=True)
            client = app.test_client()
            created = await client.post("/v1/sessions", json={}, headers=HOST)
            sid = (await created.get_json())["session_id"]
            begun = await client.post(f"/v1/sessions/{sid}/turns", json={}, headers=HOST)
            tid = (await begun.get_json())["turn_id"]
            turn = await session.begin_turn()
            yield Running(sup, server, turn, app, f"/v1/sessions/{sid}/turns/{tid}/calls")
            nursery.cancel_scope.cancel()
