"""The era probe of ``handshake``: wait for ``server/discover``, say what follows.

The decision itself is ``actors/protocol/era.py``'s table (``after_probe``); this
module only waits for the probe's end (an answer, the connection closing, or the
probe timeout) and carries out an adoption on the protocol session.
"""

from __future__ import annotations

import logging

import trio

from actors.connection.live import Live
from actors.log_events import get_logger
from actors.protocol.era import Opening, ProbeOutcome, Setting, Verdict, after_probe, probe_wait
from actors.spec import ServerSpec
from actors.tracing import HOOK

log = get_logger("actors.connection")


async def settle(live: Live, init: trio.CancelScope, spec: ServerSpec, first: Opening) -> Verdict:
    """Start ``live`` with ``first`` and settle the era: ADOPT or FALL_BACK (settled: the
    session is READY); REOPEN_AND_FALL_BACK (the connection closed under the probe: open
    it again, send ``initialize``); FAIL (``live`` reported why). Traced, the opening is
    a CLIENT span under the attempt's, its context in the opening's ``_meta``."""
    live.start_reading()
    tracing = HOOK.tracing
    if tracing is None:
        live.send_opening(first)
        return await _settle(live, init, spec, first)
    method = "server/discover" if first is Opening.PROBE else "initialize"
    parent = live.attempt_span.parent
    with tracing.request_span(live.name, method, "", parent=parent) as trace:
        live.send_opening(first, trace.meta)
        verdict = await _settle(live, init, spec, first)
        trace.sent(None, live.session.version)
        return verdict


async def _settle(live: Live, init: trio.CancelScope, spec: ServerSpec, first: Opening) -> Verdict:
    verdict = Verdict.FALL_BACK
    if first is Opening.PROBE:
        verdict = await probe(live, init, spec)
        if verdict is Verdict.REOPEN_AND_FALL_BACK:
            live.nursery.cancel_scope.cancel()
            return verdict
        if verdict is Verdict.FAIL:
            live.fail(probe_failed_text(live))
            return verdict
        if verdict is Verdict.FALL_BACK:
            live.session.fall_back()
            live.send_opening(Opening.INITIALIZE)
    if live.session.version is None:
        await live.initialized.wait()
    return verdict


async def probe(live: Live, init: trio.CancelScope, spec: ServerSpec) -> Verdict:
    """Wait for ``server/discover`` as long as ``probe_wait`` says (with ``auto``, half
    of the init time left; pinned, nine tenths of it) and say what follows."""
    setting = Setting(spec.protocol)
    with trio.move_on_after(probe_wait(setting, init.deadline - trio.current_time())):
        done = live.probe_done
        assert done is not None, "send_opening(Opening.PROBE) makes it"
        await done.wait()
    live.probing = False
    outcome = _outcome(live)
    verdict = after_probe(setting, outcome)
    if verdict is Verdict.ADOPT:
        answered = live.probe_answer
        assert answered is not None and answered.result is not None, "adopted without a result"
        live.session.adopt(answered.result)
    elif verdict is not Verdict.FAIL:
        # An answer that is not the new era's is how a handshake-era server says so:
        # not news (the era shows on the state line). No answer, or a closed
        # connection, is.
        usual = outcome in (ProbeOutcome.REFUSED, ProbeOutcome.NO_MUTUAL_VERSION)
        log.log(
            logging.DEBUG if usual else logging.INFO,
            "server/discover %s; trying initialize",
            outcome.value,
            extra={"fields": {"server": spec.name, "detail": _detail(live)}},
        )
    return verdict


def probe_failed_text(live: Live) -> str:
    """Why a server pinned to the per-request era failed its probe."""
    detail = _detail(live)
    tail = f" ({detail})" if detail else ""
    return (
        f"mcp server {live.name} is set to protocol 2026-07-28, "
        f"but server/discover {_outcome(live).value}{tail}"
    )


def _outcome(live: Live) -> ProbeOutcome:
    if live.probe_answer is not None:
        return live.probe_answer.outcome
    return ProbeOutcome.CLOSED if live.probe_closed is not None else ProbeOutcome.TIMED_OUT


def _detail(live: Live) -> str:
    answered = live.probe_answer
    if answered is not None:
        return answered.detail
    return live.probe_closed or ""
