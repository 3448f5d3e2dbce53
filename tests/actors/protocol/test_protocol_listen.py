"""The pure rules of ``actors/protocol/listen.py``: what follows a listen request's end."""

from __future__ import annotations

import pytest

from actors.protocol.listen import REOPEN_ATTEMPTS, AfterListen, after_listen, subscription_of


@pytest.mark.parametrize(
    ("acknowledged", "code", "failures", "step", "after"),
    [
        (False, -32601, 0, AfterListen.STOP, 0),  # not served: ttlMs relisting only
        (True, -32601, 0, AfterListen.STOP, 0),
        (True, None, 2, AfterListen.REOPEN, 0),  # it worked, then ended: again, from zero
        (True, -32603, 0, AfterListen.REOPEN, 0),
        (False, -32603, 0, AfterListen.REOPEN, 1),  # ended before its acknowledgement
        (False, None, 1, AfterListen.REOPEN, 2),
        (False, None, REOPEN_ATTEMPTS - 1, AfterListen.LOST, REOPEN_ATTEMPTS),
    ],
)
def test_after_listen(
    acknowledged: bool, code: int | None, failures: int, step: AfterListen, after: int
) -> None:
    assert after_listen(acknowledged=acknowledged, code=code, failures=failures) == (step, after)


@pytest.mark.parametrize(
    ("params", "subscription"),
    [
        ({"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}}, "listen-1"),
        ({"_meta": {"io.modelcontextprotocol/subscriptionId": 4}}, 4),
        ({"_meta": {"io.modelcontextprotocol/subscriptionId": True}}, None),
        ({"_meta": {}}, None),
        ({"_meta": "x"}, None),
        (None, None),
        ([1], None),
    ],
)
def test_subscription_of(params: object, subscription: object) -> None:
    assert subscription_of(params) == subscription  # type: ignore[arg-type]
