"""The per-tenant state of new-era gateway clients (``supervisor/gateway/tenants.py``):
opened at a tenant's first request, one per tenant, ended after ``idle_s`` unused and
never while in use. On Trio's MockClock (autojump)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio
import trio.testing

from supervisor.gateway.tenants import TenantStates
from tests.actors.transports.test_stdio_transport import eventually


class FakeSession:
    """What a tenant state uses of a session: its resource updates."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.runs_private = True
        self.prompts_client = True
        self.send, self.resource_updates = trio.open_memory_channel[Any](1)


def fake_sessions(opened: list[FakeSession], closed: list[FakeSession]) -> Any:
    def open_session(tenant: str, person: str | None) -> AbstractAsyncContextManager[FakeSession]:
        @asynccontextmanager
        async def block() -> AsyncIterator[FakeSession]:
            session = FakeSession(tenant)
            opened.append(session)
            try:
                yield session
            finally:
                closed.append(session)

        return block()

    return open_session


async def test_one_state_per_tenant_ends_after_idle_never_while_in_use(
    autojump_clock: trio.testing.MockClock,
) -> None:
    opened: list[FakeSession] = []
    closed: list[FakeSession] = []
    states = TenantStates(fake_sessions(opened, closed), lambda session: object(), idle_s=60.0)  # type: ignore[arg-type,return-value]
    async with trio.open_nursery() as nursery:
        states.bind(nursery)
        async with states.use("a") as first, states.use("a") as again, states.use("b"):
            assert first is again and len(states) == 2
            assert [s.tenant for s in opened] == ["a", "b"]
            assert first.session.runs_private is False  # no scope: session servers for new-era clients
            assert first.session.prompts_client is False  # shared by the tenant: no trust prompts
            await trio.sleep(600)  # a request (or listen stream) in flight for ten idle periods
            assert closed == []
        release = states.hold(first)  # a call parked between rounds
        await trio.sleep(600)
        assert [s.tenant for s in closed] == ["b"]  # b expired after its idle period; a is held
        release()
        release()  # once only
        start = trio.current_time()
        with trio.fail_after(120):
            await eventually(lambda: states.get("a") is None)
        assert 59 <= trio.current_time() - start <= 61
        assert [s.tenant for s in closed] == ["b", "a"]
        async with states.use("a") as fresh:  # the next request opens a fresh one
            assert fresh is not first and len(opened) == 3
        nursery.cancel_scope.cancel()
