"""What every request of a turn leaves behind: one audit row, a metric, a call event.

``Turn`` (``supervisor/calls/turns.py``) and its surface (``supervisor/calls/turn_surface.py``) share
this base: a request refused on the way ends in ``_audited`` (its row, durable before
the envelope is returned); one that may wait (an approval, the server) goes through
``_journaled``, which first journals the row it would leave if the supervisor died
meanwhile (outcome ``interrupted``), and a caller cancelled while it waits leaves a
row that says ``cancelled``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVarTuple

import trio

from actors.router.envelope import Envelope, failure
from supervisor.calls.in_flight import LiveCall
from supervisor.calls.services import CallServices, TurnSession
from supervisor.runtime.tracing import TRACING
from supervisor.store import AuditRow
from supervisor.store.records import person_field
from supervisor.store.replay import INTERRUPTED

Ts = TypeVarTuple("Ts")

Went = tuple[str, Envelope, float]
"""What a request that may wait ends in: the decision, the envelope, and the seconds it
spent with its server (0 when it never reached one; the latency metric's value, which
an approval's wait would only blur)."""


class TurnAudit:
    """The audit side of a turn's requests (a base of ``Turn``)."""

    session: TurnSession
    _calls: CallServices

    async def _journaled(
        self,
        tool: str,
        server: str,
        digest: tuple[str, int],
        first: str,
        go: Callable[[LiveCall, *Ts], Awaitable[Went]],
        *args: *Ts,
    ) -> Envelope:
        """Run ``go(live, *args)`` (it returns a ``Went``; ``live``: the call as listed in
        flight, ``in_flight.py``) between an
        ``interrupted`` row in the journal and the real one; ``first``: what policy
        first said. ``go`` and its arguments, not a closure: one function less per call."""
        calls, session = self._calls, self.session
        audit = calls.audit
        record = audit.new_id()
        began = trio.current_time()
        audit.started(self._row(tool, server, digest, first, INTERRUPTED, 0, 0, record))
        live = calls.in_flight.open(began, session.tenant, session.id, session.person, server, tool)
        went: Went | None = None
        try:
            if first != "ask":  # cancelled at its server by id (in_flight.py): no scope to pay for
                went = await go(live, *args)
            else:
                with _scoped(live):  # POST /v1/calls/{id}/cancel cancels it
                    went = await go(live, *args)
        except BaseException as exc:  # the caller is cancelled (or a bug): the row says so, then on
            outcome = "cancelled" if isinstance(exc, trio.Cancelled) else "error"
            seconds = trio.current_time() - began  # the whole wait: when the server had it is unknown
            row = self._row(tool, server, digest, first, outcome, round(seconds * 1000), 0, record)
            audit.finished(row)
            self._observe(row, seconds)
            raise
        finally:
            calls.in_flight.close(live)
        if went is None:  # cancelled by its id while it waited for an approval
            seconds = trio.current_time() - began
            cancelled = failure(tool, "cancelled", f"{tool} was cancelled by {live.cancelled_by}")
            return await self._audited(
                tool, server, digest, first, cancelled, record, seconds, live.cancelled_by
            )
        decided, envelope, seconds = went
        if (
            live.cancelled_by is not None
            and envelope.error is not None
            and envelope.error.code == "cancelled"
        ):
            return await self._audited(
                tool, server, digest, decided, envelope, record, seconds, live.cancelled_by
            )
        return await self._audited(tool, server, digest, decided, envelope, record, seconds)

    async def _audited(
        self,
        tool: str,
        server: str,
        digest: tuple[str, int],
        decision: str,
        envelope: Envelope,
        record: str | None = None,
        seconds: float = 0.0,
        cancelled_by: str | None = None,
    ) -> Envelope:
        """Leave the call's row (durable before this returns), count it (``seconds``: the
        time with its server), announce it."""
        audit = self._calls.audit
        outcome = "ok" if envelope.ok else (envelope.error.code if envelope.error else "error")
        row = self._row(
            tool,
            server,
            digest,
            decision,
            outcome,
            envelope.duration_ms,
            len(envelope.text.encode()),
            record or audit.new_id(),
            cancelled_by,
        )
        audit.finished(row)
        self._observe(row, seconds)
        return envelope

    def _row(
        self,
        tool: str,
        server: str,
        digest: tuple[str, int],
        decision: str,
        outcome: str,
        duration_ms: int,
        result_bytes: int,
        record: str,
        cancelled_by: str | None = None,
    ) -> AuditRow:
        """The row of one request; traced, with its trace's id (the call span is current)."""
        session = self.session
        tracing = TRACING.active
        return AuditRow(
            time.time(),
            session.tenant,
            session.id,
            tool,
            server,
            decision,
            outcome,
            duration_ms,
            digest[0],
            digest[1],
            result_bytes,
            record,
            None if tracing is None else tracing.trace_id(),
            session.person,
            cancelled_by=cancelled_by,
        )

    def _observe(self, row: AuditRow, seconds: float) -> None:
        """Metrics and the call event of one ended call (a traced one's with its trace id,
        as its row; an untraced one's as before)."""
        calls = self._calls
        calls.metrics.observe_call(row.server, row.outcome, seconds)
        if seconds:  # it reached its server
            calls.latency.observe(row.server, seconds)
        tracing = TRACING.active
        if tracing is not None:
            tracing.ended(row.server, row.decision, row.outcome)
        event = {
            "type": "call",
            "tool": row.tool,
            "server": row.server,
            "outcome": row.outcome,
            "decision": row.decision,
            "duration_ms": row.duration_ms,
            "session": row.session,
            "tenant": row.tenant,
        }
        if row.trace_id is not None:
            event["trace_id"] = row.trace_id
        event.update(person_field(row.person, row.tenant))
        calls.events.publish(event)


@contextlib.contextmanager
def _scoped(live: LiveCall) -> Iterator[None]:
    """``live`` cancellable by its scope while the block runs."""
    with trio.CancelScope() as live.scope:
        yield
