"""The sessions' server log levels, told to the shared connection actors
(``supervisor/runtime/log_wants.py``): a ``WantLogs`` to each when the most verbose
level any session wants changes, in order, and a session that ends wants nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from actors.connection.messages import ConnectionMessage, WantLogs
from supervisor import Supervisor
from supervisor.runtime.log_wants import LogWants
from tests.service.test_embedding import config_of, mini_spec


async def test_each_shared_actor_is_told_the_most_verbose_level_when_it_changes() -> None:
    first, read_first = trio.open_memory_channel[ConnectionMessage](10)
    gone, _ = trio.open_memory_channel[ConnectionMessage](10)
    gone.close()  # a server removed meanwhile is skipped
    wants = LogWants()
    wants.bind(lambda: [gone, first])
    await wants.want("a", "error")
    await wants.want("b", "info")
    await wants.want("a", "debug")
    await wants.want("a", "warning")  # b's info is still the most verbose
    await wants.want("b", None)
    await wants.want("a", None)
    first.close()
    told = [message async for message in read_first]
    levels = ["error", "info", "debug", "info", "warning", None]
    assert told == [WantLogs(level) for level in levels]
    assert wants.level is None


async def test_a_session_counts_while_it_lasts(tmp_path: Path) -> None:
    async with Supervisor.open(
        config_of(mini_spec("mini", python=sys.executable)), state_dir=tmp_path
    ) as sup:
        wants = sup._shared.factory.log_wants
        async with sup.session() as one, sup.session() as two:
            await one.want_logs("info")
            await two.want_logs("debug", who="a request")
            await two.want_logs("error")  # its clients' most verbose is still debug
            assert wants.level == "debug"
            await two.want_logs(None, who="a request")
            assert wants.level == "info"
        assert wants.level is None
