"""Requests in flight by tenant and id (``supervisor/calls/requests.py``)."""

from __future__ import annotations

import pytest

from supervisor import RequestInFlight
from supervisor.calls.requests import RequestRegistry


def test_an_id_in_flight_is_its_own_error_and_only_for_its_tenant() -> None:
    registry = RequestRegistry()
    registry.open("r-1", "alice", "fs_read")
    with pytest.raises(RequestInFlight) as raised:
        registry.open("r-1", "alice", "fs_write")
    assert raised.value.request_id == "r-1"
    assert str(raised.value) == "request id 'r-1' is already in flight"
    assert isinstance(raised.value, ValueError)  # what hosts caught before it had a name
    registry.open("r-1", "bob", "fs_read")  # another tenant's ids are its own
    registry.close("r-1", "alice")
    registry.open("r-1", "alice", "fs_read")  # closed: the id is free again
