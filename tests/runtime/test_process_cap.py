"""The bridge's process cap (``supervisor/runtime/process_cap.py``): one count of
sessions' and warm spares' processes that the warm pool and the hub both ask."""

from __future__ import annotations

from actors.spec import ServerSpec
from supervisor.runtime.process_cap import ProcessCap, counts_toward_cap


def test_spares_wait_for_a_hub_then_fill_what_sessions_leave() -> None:
    spares = [0]
    limit = [2]
    cap = ProcessCap(lambda: limit[0], lambda: spares[0])
    assert not cap.room_for_spare()  # no hub counts under it yet
    cap.open()
    assert cap.room_for_spare() and cap.processes == 0
    cap.session_started()
    spares[0] = 1
    assert cap.processes == 2 and cap.full and not cap.room_for_spare()
    limit[0] = 3  # a reload raised it
    assert cap.room_for_spare()
    cap.session_ended()
    limit[0] = 2
    assert cap.processes == 1 and not cap.full


def test_only_bridged_servers_count() -> None:
    assert counts_toward_cap(ServerSpec(name="b", command=("x",), bridge=True))
    assert not counts_toward_cap(ServerSpec(name="s", command=("x",)))
