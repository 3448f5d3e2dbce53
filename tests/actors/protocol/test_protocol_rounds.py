"""Multi round-trip requests (SEP-2322) in the sans-I/O core: recognising an
``input_required`` result and building the retry. Tables of cases, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from actors.protocol.errors import ProtocolError
from actors.protocol.rounds import (
    InputRequest,
    InputRequired,
    input_required,
    retry_params,
    state_only_delay,
)

CONFIRM = {"method": "elicitation/create", "params": {"message": "Confirm?"}}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"content": []}, None),  # no resultType: complete
        ({"resultType": "complete", "content": []}, None),
        ({"resultType": "task", "task": {}}, None),  # an extension's tag, not ours to drive
        (
            {"resultType": "input_required", "inputRequests": {"confirm": CONFIRM}, "requestState": "s1"},
            InputRequired((InputRequest("confirm", "elicitation/create", {"message": "Confirm?"}),), "s1"),
        ),
        (
            {"resultType": "input_required", "inputRequests": {"confirm": CONFIRM}},
            InputRequired((InputRequest("confirm", "elicitation/create", {"message": "Confirm?"}),), None),
        ),
        ({"resultType": "input_required", "requestState": "working"}, InputRequired((), "working")),
        (
            {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}},
            InputRequired((InputRequest("r", "roots/list", {}),), None),
        ),
    ],
)
def test_input_required_is_recognised(result: dict[str, Any], expected: InputRequired | None) -> None:
    assert input_required(result) == expected


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ({"resultType": "input_required"}, "neither inputRequests nor requestState"),
        ({"resultType": "input_required", "inputRequests": {}}, "neither"),
        ({"resultType": "input_required", "inputRequests": []}, "inputRequests must be an object"),
        ({"resultType": "input_required", "requestState": 7}, "requestState must be a string"),
        (
            {"resultType": "input_required", "inputRequests": {"a": {"params": {}}}},
            "inputRequests.a has no method",
        ),
        (
            {"resultType": "input_required", "inputRequests": {"a": {"method": "x", "params": [1]}}},
            "inputRequests.a.params must be an object",
        ),
    ],
)
def test_a_malformed_input_required_result_names_the_problem(result: dict[str, Any], problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        input_required(result)


ORIGINAL = {"name": "deploy", "arguments": {"env": "prod"}}
ANSWER = {"action": "accept", "content": {"confirmed": True}}


@pytest.mark.parametrize(
    ("original", "responses", "state", "expected"),
    [
        (  # the state is echoed unchanged, the answers keyed as asked
            ORIGINAL,
            {"confirm": ANSWER},
            '{"nonce":"x"}',
            {**ORIGINAL, "inputResponses": {"confirm": ANSWER}, "requestState": '{"nonce":"x"}'},
        ),
        (
            ORIGINAL,
            {"confirm": ANSWER},
            None,
            {**ORIGINAL, "inputResponses": {"confirm": ANSWER}},
        ),  # no state
        (ORIGINAL, {}, "working", {**ORIGINAL, "requestState": "working"}),  # state only
        (  # a later round replaces the earlier round's answers and state
            {
                **ORIGINAL,
                "inputResponses": {"old": ANSWER},
                "requestState": "old",
                "_meta": {"progressToken": 1},
            },
            {"new": ANSWER},
            None,
            {**ORIGINAL, "inputResponses": {"new": ANSWER}},
        ),
    ],
)
def test_retry_params(
    original: dict[str, Any], responses: dict[str, Any], state: str | None, expected: dict[str, Any]
) -> None:
    assert retry_params(original, responses, state) == expected


def test_state_only_retries_back_off_to_a_cap() -> None:
    assert [state_only_delay(n) for n in (1, 2, 3, 4, 5, 9)] == [0.05, 0.1, 0.2, 0.25, 0.25, 0.25]


def test_describe_names_what_was_asked() -> None:
    required = input_required({"resultType": "input_required", "inputRequests": {"confirm": CONFIRM}})
    assert required is not None and required.describe() == "elicitation/create (confirm)"
