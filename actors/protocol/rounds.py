"""Multi round-trip requests (SEP-2322, the 2026-07-28 era), as pure functions.

In the per-request era a server does not send ``elicitation/create`` or
``sampling/createMessage`` to the client while a request is open. It answers the
request (``tools/call``, ``prompts/get``, ``resources/read``) with a result whose
``resultType`` is ``"input_required"``, carrying ``inputRequests`` (server-chosen keys,
each an embedded ``{method, params}`` request) and/or an opaque ``requestState``. The
client answers every input request and sends the original request again, under a new
JSON-RPC id, with ``inputResponses`` (the same keys) and ``requestState`` echoed byte
for byte; with no ``requestState`` in the result, none is sent. A result without
``resultType`` is complete.

``input_required`` recognises such a result; ``retry_params`` builds the retry's
params from the original's. Nothing here keeps state: each exchange holds its own, so
calls made in parallel never see each other's answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from actors.protocol.errors import ProtocolError

INPUT_REQUIRED = "input_required"

MAX_ROUNDS = 10
"""Rounds after which an exchange gives up (the official SDKs' default)."""

STATE_ONLY_DELAYS_S = (0.05, 0.1, 0.2, 0.25)
"""How long to wait before retrying a result that carries only ``requestState``
(nothing to answer: the server is still working), by round; the last repeats."""


@attrs.frozen(slots=True)
class InputRequest:
    """One embedded request the server needs answered before it can finish."""

    key: str
    method: str
    params: Mapping[str, Any]


@attrs.frozen(slots=True)
class InputRequired:
    """An ``input_required`` result: what to answer, and the state to echo."""

    requests: tuple[InputRequest, ...]
    state: str | None

    def describe(self) -> str:
        """What the server asked for, for error messages (``elicitation/create (confirm)``)."""
        asked = ", ".join(f"{r.method} ({r.key})" for r in self.requests)
        return asked or "nothing but to retry"


def input_required(result: Mapping[str, Any]) -> InputRequired | None:
    """The input a result asks for, or None when the result is complete (its
    ``resultType`` is absent or anything but ``input_required``). A malformed
    ``input_required`` result is a ProtocolError naming what is wrong."""
    if result.get("resultType") != INPUT_REQUIRED:
        return None
    raw = result.get("inputRequests")
    state = result.get("requestState")
    if state is not None and not isinstance(state, str):
        raise ProtocolError("input_required result: requestState must be a string")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ProtocolError("input_required result: inputRequests must be an object")
    requests = []
    for key, request in raw.items():
        if not isinstance(request, Mapping) or not isinstance(request.get("method"), str):
            raise ProtocolError(f"input_required result: inputRequests.{key} has no method")
        params = request.get("params")
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ProtocolError(f"input_required result: inputRequests.{key}.params must be an object")
        requests.append(InputRequest(str(key), request["method"], params))
    if not requests and state is None:
        raise ProtocolError("input_required result carries neither inputRequests nor requestState")
    return InputRequired(tuple(requests), state)


def retry_params(
    original: Mapping[str, Any], responses: Mapping[str, Mapping[str, Any]], state: str | None
) -> dict[str, Any]:
    """The params of the retry: the original request's, with this round's answers
    (none: no ``inputResponses``) and the state echoed unchanged (none: no
    ``requestState``). Answers and state of an earlier round are replaced, never kept."""
    params = {k: v for k, v in original.items() if k not in ("inputResponses", "requestState", "_meta")}
    if responses:
        params["inputResponses"] = {key: dict(answer) for key, answer in responses.items()}
    if state is not None:
        params["requestState"] = state
    return params


def state_only_delay(round_number: int) -> float:
    """The wait before retrying a state-only result, in round ``round_number`` (1-based)."""
    return STATE_ONLY_DELAYS_S[min(round_number, len(STATE_ONLY_DELAYS_S)) - 1]
