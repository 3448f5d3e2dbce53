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
from supervisor.store.journal_lines import LineFields, line_fields
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
        began = trio.current_time()
        fields = self._fields(tool, server, digest, first, audit.new_id())
        audit.started_fields(fields)  # outcome interrupted, duration 0: the row if we die
        live = calls.in_flight.open(began, session.tenant, session.id, session.person, server, tool)
        went: Went | None = None
        try:
            if first != "ask":  # cancelled at its server by id (in_flight.py): no scope to pay for
                went = await go(live, *args)
            else:
                with _scoped(live):  # POST /v1/calls/{id}/cancel cancels it
                    went = await go(live, *args)
        except BaseException as exc:  # the caller is cancelled (or a bug): the row says so, then on
            seconds = trio.current_time() - began  # the whole wait: when the server had it is unknown
            fields["at"] = time.time()
            fields["outcome"] = "cancelled" if isinstance(exc, trio.Cancelled) else "error"
            fields["duration_ms"] = round(seconds * 1000)
            audit.finished_fields(fields)
            self._observe(fields, seconds)
            raise
        finally:
            calls.in_flight.close(live)
        if went is None:  # cancelled by its id while it waited for an approval
            seconds = trio.current_time() - began
            cancelled = failure(tool, "cancelled", f"{tool} was cancelled by {live.cancelled_by}")
            return self._ended(fields, first, cancelled, seconds, live.cancelled_by)
        decided, envelope, seconds = went
        if (
            live.cancelled_by is not None
            and envelope.error is not None
            and envelope.error.code == "cancelled"
        ):
            return self._ended(fields, decided, envelope, seconds, live.cancelled_by)
        return self._ended(fields, decided, envelope, seconds)

    async def _audited(
        self,
        tool: str,
        server: str,
        digest: tuple[str, int],
        decision: str,
        envelope: Envelope,
    ) -> Envelope:
        """Leave the row of a request refused on the way (durable before this returns),
        count it, announce it."""
        fields = self._fields(tool, server, digest, decision, self._calls.audit.new_id())
        return self._ended(fields, decision, envelope)

    def _ended(
        self,
        fields: LineFields,
        decision: str,
        envelope: Envelope,
        seconds: float = 0.0,
        cancelled_by: str | None = None,
    ) -> Envelope:
        """The request's row, from its ``fields``: journaled at once, counted
        (``seconds``: the time with its server), announced."""
        fields["at"] = time.time()
        fields["decision"] = decision
        fields["outcome"] = "ok" if envelope.ok else (envelope.error.code if envelope.error else "error")
        fields["duration_ms"] = envelope.duration_ms
        fields["result_bytes"] = len(envelope.text.encode())
        if cancelled_by is not None:  # the last key of a line, as line_fields puts it
            fields["cancelled_by"] = cancelled_by
        self._calls.audit.finished_fields(fields)
        self._observe(fields, seconds)
        return envelope

    def _fields(
        self, tool: str, server: str, digest: tuple[str, int], decision: str, record: str
    ) -> LineFields:
        """The line fields of one request, as its start line says (outcome
        ``interrupted``, duration 0); a traced request's with its trace's id (the call
        span is current)."""
        session = self.session
        tracing = TRACING.active
        return line_fields(
            record,
            time.time(),
            session.tenant,
            session.id,
            tool,
            server,
            decision,
            INTERRUPTED,
            0,
            digest[0],
            digest[1],
            0,
            None if tracing is None else tracing.trace_id(),
            session.person,
            self._calls.audit.replica,
        )

    def _observe(self, fields: LineFields, seconds: float) -> None:
        """Metrics and the call event of one ended call (a traced one's with its trace id,
        as its row; an untraced one's as before)."""
        calls = self._calls
        server, outcome = fields["server"], fields["outcome"]
        calls.metrics.observe_call(server, outcome, seconds)
        if seconds:  # it reached its server
            calls.latency.observe(server, seconds)
        tracing = TRACING.active
        if tracing is not None:
            tracing.ended(server, fields["decision"], outcome)
        tenant = fields["tenant"]
        event = {
            "type": "call",
            "tool": fields["tool"],
            "server": server,
            "outcome": outcome,
            "decision": fields["decision"],
            "duration_ms": fields["duration_ms"],
            "session": fields["session"],
            "tenant": tenant,
        }
        if "trace_id" in fields:
            event["trace_id"] = fields["trace_id"]
        event.update(person_field(fields.get("person"), tenant))
        calls.events.publish(event)


@contextlib.contextmanager
def _scoped(live: LiveCall) -> Iterator[None]:
    """``live`` cancellable by its scope while the block runs."""
    with trio.CancelScope() as live.scope:
        yield
