"""Who wants which of a server's log messages (``actors/connection/log_levels.py``):
the most verbose level of many clients, what a server is asked for in each era, and
where one message goes (its call's caller, or every session's clients)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from actors.connection.calls import InFlightTable
from actors.connection.client_side import ClientSide
from actors.connection.log_levels import LogDemand, LogLevels, most_verbose
from actors.connection.messages import CallTool
from actors.connection.server_log import ServerLogged
from actors.protocol.era import Era
from actors.protocol.messages import UNTIED
from actors.protocol.notifications import LogMessage


def test_the_most_verbose_level_is_the_least_severe_one() -> None:
    assert most_verbose(["error", "info", None, "warning"]) == "info"
    assert most_verbose([None, None]) is None and most_verbose([]) is None


def test_a_demand_says_when_its_most_verbose_level_changes() -> None:
    demand = LogDemand()
    assert demand.level is None
    assert demand.want("a", "warning") and demand.level == "warning"
    assert demand.want("b", "debug") and demand.level == "debug"
    assert not demand.want("a", "error"), "b still wants debug"
    assert demand.want("b", None) and demand.level == "error"
    assert not demand.want("c", None), "who wanted nothing is forgotten quietly"
    assert demand.want("a", None) and demand.level is None
    with pytest.raises(ValueError, match="unknown log level 'loud'; one of debug, info"):
        demand.want("a", "loud")


def test_what_a_server_is_asked_for_in_each_era() -> None:
    levels = LogLevels("warning")
    assert levels.asked() == "warning"  # our own log's, with no client wanting any
    levels.wanted = "info"
    assert levels.asked() == "info"
    levels.wanted = "error"
    assert levels.asked() == "warning", "never less than our log needs"
    caller = ClientSide("s", log_level="debug")
    assert levels.for_call(caller) == "debug"
    assert levels.for_call(ClientSide("s")) == "warning" and levels.for_call(None) == "warning"


def calls(*clients: ClientSide | None) -> InFlightTable:
    """Calls in flight, request ids 0, 1, … in order."""
    table = InFlightTable(30, 300)
    for request_id, client in enumerate(clients):
        table.add(request_id, CallTool("t", {}, cast(Any, object()), client=client), 0.0)
    return table


def heard() -> tuple[list[ServerLogged], ClientSide]:
    got: list[ServerLogged] = []
    return got, ClientSide("a", log_level="info", logs=got.append)


def test_a_message_tagged_with_its_call_is_its_callers_alone() -> None:
    _, caller = heard()
    levels, inflight = LogLevels("warning", wanted="debug"), calls(caller, ClientSide("b"))
    assert levels.route(LogMessage("info", None, "x", related=0), inflight, Era.HANDSHAKE) == (
        "info",
        caller.logs,
    )
    # A caller that takes no log messages (an embedding host's session): our log only.
    assert levels.route(LogMessage("info", None, "x", related=1), inflight, Era.HANDSHAKE) == (None, None)
    # Tagged with no call (tools/list), or untied (the GET stream): every session's clients.
    for related in (7, UNTIED):
        message = LogMessage("info", None, "x", related=related)
        assert levels.route(message, inflight, Era.PER_REQUEST) == ("debug", None)


def test_over_stdio_the_per_request_era_ties_a_message_to_the_one_call_that_asked_for_it() -> None:
    _, caller = heard()
    levels = LogLevels("warning")
    inflight = calls(caller, ClientSide("b"), None)  # only the first asked for info
    assert levels.route(LogMessage("info", None, "x"), inflight, Era.PER_REQUEST) == ("info", caller.logs)
    # Every call asked for warning (our log's level): it could be any call's.
    assert levels.route(LogMessage("warning", None, "x"), inflight, Era.PER_REQUEST) == ("warning", None)
    # Two calls that asked for info: either's, so neither's.
    _, other = heard()
    both = calls(caller, other)
    assert levels.route(LogMessage("info", None, "x"), both, Era.PER_REQUEST) == ("warning", None)
    # The handshake era's log messages are the connection's.
    assert levels.route(LogMessage("info", None, "x"), inflight, Era.HANDSHAKE) == ("warning", None)
