"""One new-era client's call that may need the client's input, run apart from the
HTTP request that began it.

A per-request-era client is never sent a request: when a backend asks for sampling,
elicitation or roots while serving its call, the client's HTTP request is answered
"input required" (``stateless.py``), and the client sends the request again with its
answers. So the backend call cannot live in the task of the HTTP request: it runs in
the gateway's nursery as a ``ParkedCall``, and each HTTP request of the exchange
attaches to it, waits for its next event (the final answer, or the input it needs
now) and detaches.

- Its server requests come to ``ask`` (the call's ``ClientSide`` handler). Each one
  waits, under a key (the backend's own when it asked in the per-request era, else
  ``elicitation-1``, …), until a retry brings the answer.
- While no HTTP request is attached, the call's cancel scope has a deadline: a call
  nobody resumes within ``park_s`` is cancelled (the backend is told).
- A hang-up of the attached HTTP request cancels the call, as a cancel would.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from actors.connection.client_side import INPUT_KEY, RequestRefused
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.results import METHOD_NOT_FOUND, MISSING_CAPABILITY, JsonRpcError

SETTLE_S = 0.01
"""After the first input request of a round, how long to wait for its siblings (a
backend of the per-request era asks for all of a round's inputs at once)."""

CAPABILITY_OF = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


@attrs.define(eq=False)
class InputAsk:
    """One server request waiting for the client's answer."""

    key: str
    method: str
    params: Any
    answer: Mapping[str, Any] | None = None
    answered: trio.Event = attrs.field(factory=trio.Event)

    def request(self) -> dict[str, Any]:
        """As an entry of ``inputRequests``."""
        return {"method": self.method, "params": self.params if self.params is not None else {}}


class _Relay:
    """The outlet of a parked call: whatever HTTP request is attached now (progress
    sent while none is attached is dropped)."""

    def __init__(self) -> None:
        self.target: Outlet | None = None

    async def send(self, message: Mapping[str, Any]) -> None:
        if self.target is not None:
            await self.target.send(message)


@attrs.frozen(slots=True)
class InputRound:
    """The input requests a parked call waits on now, by key."""

    asks: Mapping[str, InputAsk]


class ParkedCall:
    """See the module docstring. ``run`` is the backend call (in the gateway's nursery)."""

    def __init__(
        self,
        tenant: str,
        method: str,
        target: str,
        capabilities: Mapping[str, Any],
        *,
        park_s: float,
        presupplied: Mapping[str, Any] | None = None,
    ) -> None:
        self.id = secrets.token_hex(12)
        self.tenant = tenant
        self.method = method
        self.target = target
        self.capabilities = capabilities
        self.park_s = park_s
        self.round = 0
        self.outlet = _Relay()
        self.scope = trio.CancelScope()
        self._presupplied = {k: v for k, v in (presupplied or {}).items() if isinstance(v, Mapping)}
        self._asks: dict[str, InputAsk] = {}
        self._numbers: dict[str, int] = {}
        self._result: dict[str, Any] | None = None
        self._error: JsonRpcError | None = None
        self._missing: str | None = None
        self.done = trio.Event()
        self._changed = trio.Event()
        self.attached = False

    # ----------------------------------------------------------- the backend side

    async def run(self, call: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        """Run the backend call to its end (or until cancelled) and keep its answer."""
        with self.scope:
            try:
                self._result = await call()
            except JsonRpcError as error:
                self._error = error
        if self._result is None and self._error is None:
            self._error = JsonRpcError(-32800, "the call was cancelled: nobody resumed it in time")
        self.done.set()
        self._wake()

    async def ask(self, server: str, method: str, params: Any) -> Mapping[str, Any] | None:
        """The call's server requests (its ``ClientSide`` handler)."""
        capability = CAPABILITY_OF.get(method)
        if capability is None:
            return None  # not a client's to answer: the supervisor-level handler may
        if not isinstance(self.capabilities.get(capability), Mapping):
            self._missing = capability
            self._wake()
            raise RequestRefused(
                METHOD_NOT_FOUND, f"the gateway's client did not declare the {capability} capability"
            )
        key = self._key(INPUT_KEY.get(), method)
        supplied = self._presupplied.pop(key, None)
        if supplied is not None:
            return supplied
        ask = InputAsk(key, method, params)
        self._asks[key] = ask
        self._wake()
        try:
            await ask.answered.wait()
        finally:
            self._asks.pop(key, None)
        return ask.answer

    def _key(self, backend_key: str | None, method: str) -> str:
        base = backend_key or method.split("/")[0]
        if backend_key is not None and base not in self._asks:
            return base
        number = self._numbers.get(base, 0)
        while True:
            number += 1
            key = f"{base}-{number}"
            if key not in self._asks:
                self._numbers[base] = number
                return key

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -------------------------------------------------------------- the client side

    def attach(self, outlet: Outlet) -> None:
        """An HTTP request of the exchange waits on the call: no park deadline now."""
        self.attached = True
        self.outlet.target = outlet
        self.scope.deadline = math.inf

    def detach(self) -> None:
        """The HTTP request was answered: the call waits at most ``park_s`` for the next."""
        self.attached = False
        self.outlet.target = None
        self.scope.deadline = trio.current_time() + self.park_s

    def answer(self, responses: Mapping[str, Any]) -> None:
        """Hand the client's answers to the requests waiting for them (unknown keys and
        answers that are not objects are ignored: those requests are asked again)."""
        for key, response in responses.items():
            ask = self._asks.get(key)
            if ask is not None and isinstance(response, Mapping) and not ask.answered.is_set():
                ask.answer = response
                ask.answered.set()

    async def next_event(self) -> dict[str, Any] | InputRound:
        """The call's final answer (a result dict; ``JsonRpcError`` for an error), or
        the input requests it waits on now (by key)."""
        while True:
            if self._missing is not None:
                raise JsonRpcError(
                    MISSING_CAPABILITY,
                    f"this request needs the client's {self._missing} capability, which the "
                    "request's _meta clientCapabilities does not declare",
                    {"requiredCapabilities": {self._missing: {}}},
                )
            if self.done.is_set():
                if self._error is not None:
                    raise self._error
                assert self._result is not None
                return self._result
            if any(not ask.answered.is_set() for ask in self._asks.values()):
                await trio.sleep(SETTLE_S)  # let the round's other requests arrive
                if self._missing is None and not self.done.is_set():
                    return InputRound({k: a for k, a in self._asks.items() if not a.answered.is_set()})
                continue
            await self._changed.wait()

    def cancel(self) -> None:
        """Stop the backend call (its server is told)."""
        self.scope.cancel()
