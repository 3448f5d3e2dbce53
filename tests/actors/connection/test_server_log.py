"""A server's log messages on their way to our log: the level gate and the token bucket.

A server that ignores ``logging/setLevel``, or floods at its level, must cost our log
and the event loop every other server shares next to nothing (issue 28: 100,000
messages in one call were 12 to 18 MB of log and slowed a healthy server's calls from
18 ms to over a second). On Trio's MockClock.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from actors.connection.server_log import LOG_BURST, LOG_RATE_PER_S, ServerLog, ServerLogged, admits
from actors.log_events import event_name, record_fields
from actors.protocol.notifications import LogMessage
from actors.redaction import Redactor
from actors.token_bucket import TokenBucket


class CountingRedactor(Redactor):
    """Counts the texts it is asked to redact: formatting a message redacts it."""

    def __init__(self) -> None:
        super().__init__(())
        self.calls = 0

    def redact(self, text: str) -> str:
        self.calls += 1
        return super().redact(text)


@pytest.fixture(autouse=True)
def _everything_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="actors.server")


@asynccontextmanager
async def server_log() -> AsyncIterator[tuple[ServerLog, CountingRedactor, list[ServerLogged]]]:
    """A server's log for the block, with the redactor it formats with and the sink's list."""
    redactor, sink = CountingRedactor(), []
    async with trio.open_nursery() as nursery:
        yield ServerLog("chatty", redactor, nursery, sink.append), redactor, sink
        nursery.cancel_scope.cancel()


def logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if event_name(r) == "server log"]


def drops(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [record_fields(r) for r in caplog.records if event_name(r) == "server log messages dropped"]


def messages(level: str, count: int) -> Iterable[LogMessage]:
    return (LogMessage(level, "db", {"n": n}) for n in range(count))


async def test_messages_below_the_log_level_are_dropped_before_any_formatting(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with server_log() as (log, redactor, sink):
        for message in [*messages("debug", 1000), *messages("info", 1000), *messages("notice", 1000)]:
            log.take(message, "warning", "warning")
        assert redactor.calls == 0 and logged(caplog) == [] and sink == []
        log.take(LogMessage("warning", None, "disk almost full"), "warning", "warning")
        log.take(LogMessage("LOUD", None, "an unknown level counts as warning"), "warning", "warning")
        log.take(LogMessage("Error", None, "levels are read in any case"), "warning", "warning")
        await trio.sleep(30)
    assert [r.levelno for r in logged(caplog)] == [logging.WARNING, logging.WARNING, logging.ERROR]
    assert [m.level for m in sink] == ["warning", "warning", "error"], "clients hear what we logged"
    assert drops(caplog) == [], "what was not asked for is not counted as dropped"


async def test_a_flood_is_held_to_100_a_second_with_bursts_of_200_and_counted_every_10_s(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with server_log() as (log, redactor, sink):
        for message in messages("error", 100_000):  # at once: the burst passes, no more
            log.take(message, "warning", "warning")
        assert len(logged(caplog)) == LOG_BURST == 200 and len(sink) == 200
        assert redactor.calls <= 2 * LOG_BURST, "what is dropped is never formatted"
        await trio.sleep(9.9)
        assert drops(caplog) == []
        await trio.sleep(0.2)
        assert drops(caplog) == [{"server": "chatty", "dropped": 99_800, "limit": "100/s, bursts of 200"}]
        # Then 1,000 a second for 20 s: 100 a second get through (after the 200 the
        # quiet 10 s gave back), one count every 10 s.
        for _ in range(20_000):
            log.take(LogMessage("warning", None, "again"), "warning", "warning")
            await trio.sleep(0.001)
        await trio.sleep(10)
    passed = len(logged(caplog)) - 200
    assert LOG_BURST + 20 * LOG_RATE_PER_S - 5 <= passed <= LOG_BURST + 20 * LOG_RATE_PER_S + 5
    counts = [fields["dropped"] for fields in drops(caplog)]
    assert len(counts) == 3 and sum(counts) == 99_800 + 20_000 - passed  # type: ignore[arg-type]


async def test_a_count_still_due_is_told_when_the_connection_ends(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with server_log() as (log, _, _):
        for message in messages("warning", 250):
            log.take(message, "debug")
        await trio.sleep(1)
    assert [fields["dropped"] for fields in drops(caplog)] == [50]


async def test_our_log_the_clients_and_a_caller_each_get_what_their_level_admits(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caller: list[ServerLogged] = []
    async with server_log() as (log, redactor, sink):
        log.take(LogMessage("info", None, "the clients asked for info"), "warning", "info")
        log.take(LogMessage("error", None, "everyone's"), "warning", "info")
        log.take(LogMessage("debug", None, "nobody's"), "warning", "info")
        log.take(LogMessage("debug", None, "the caller's"), "warning", "debug", caller.append)
        log.take(LogMessage("info", None, "ours: a caller that wants none"), "info", None, caller.append)
        assert redactor.calls == 4, "what nobody wants is never formatted"
    assert [m.data for m in sink] == ["the clients asked for info", "everyone's"]
    assert [m.data for m in caller] == ["the caller's"]
    ours = [record_fields(r)["data"] for r in logged(caplog)]
    assert ours == ["everyone's", "ours: a caller that wants none"]


def test_the_level_order_is_rfc_5424s() -> None:
    assert admits("warning", "error") and admits("warning", "warning") and not admits("error", "warning")
    assert admits("debug", "emergency") and not admits("emergency", "alert")
    assert admits("warning", "nonsense") and not admits("error", "nonsense")


def test_a_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = TokenBucket(2.0, 3)
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.take(0.4) is False and bucket.take(0.5) is True  # one token per 0.5 s
    assert [bucket.take(100.0) for _ in range(4)] == [True, True, True, False]  # never above 3
    with pytest.raises(ValueError, match="positive rate"):
        TokenBucket(0, 1)
