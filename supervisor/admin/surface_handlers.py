"""The admin API's handlers for the surface beyond tools: a turn's resources,
templates and prompts, reads, prompt gets, completions, and a session's resource
subscriptions (``openapi.ROUTES`` names them; ``AdminApi`` inherits them).

Each answers like a call: the turn's envelope (``ok`` with the content, or an error
code: ``unknown_resource``, ``unknown_prompt``, ``unsupported``, ``denied`` …), one
audit row per read, prompt get and completion. Listings are the turn's frozen
surface, as the model was shown it. A subscription's updates reach the session's
tenant on ``/v1/events`` as ``resource_updated`` events (``hosted.py`` hands them on).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from quart import request
from quart_trio.wrappers import TrioResponse

from actors.router.envelope import Envelope
from supervisor.admin import bodies
from supervisor.admin.caller import body
from supervisor.admin.traced import arrival, traced
from supervisor.calls.requests import RequestInFlight
from supervisor.web.errors import ApiError

if TYPE_CHECKING:
    from supervisor.calls.turns import Turn
    from supervisor.sessions.session import Session


class _Api(Protocol):
    """What these handlers use of ``AdminApi``."""

    def _json(
        self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> TrioResponse: ...

    def _session(self, sid: str) -> Session: ...

    def _turn(self, sid: str, tid: str) -> Turn: ...


async def _answer(api: _Api, pending: Awaitable[Envelope], request_id: str | None) -> TrioResponse:
    """The envelope of a read, prompt get or completion (a request id already in
    flight for this tenant: 409, like a call's)."""
    try:
        envelope = await pending
    except RequestInFlight as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    return api._json(envelope.as_dict(), 200, {"X-Request-Id": request_id} if request_id else None)


def _object(data: Mapping[str, Any], field: str, *, required: bool) -> dict[str, Any] | None:
    value = data.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise bodies.bad_field(field, "must be an object" if value is not None else "is required (an object)")
    return value


async def _subscription() -> tuple[str, str | None]:
    """``uri`` and ``server`` of a subscription, from the body or else the query."""
    data = await body(optional=True) or dict(request.args)
    uri = bodies.string(data, "uri")
    assert uri is not None
    return uri, bodies.string(data, "server", required=False)


class SurfaceHandlers:
    """The surface's handlers (a mixin of ``AdminApi``)."""

    async def list_resources(self: _Api, sid: str, tid: str) -> TrioResponse:
        turn = self._turn(sid, tid)
        return self._json(
            {
                "turn_id": turn.id,
                "epoch": turn.epoch,
                "resources": turn.resource_listing(),
                "templates": turn.template_listing(),
            }
        )

    async def read_resource(self: _Api, sid: str, tid: str) -> TrioResponse:
        turn = self._turn(sid, tid)
        data = await body()
        uri = bodies.string(data, "uri")
        assert uri is not None
        server = bodies.string(data, "server", required=False)
        rid = bodies.request_id(data)
        pending = traced("resources/read", uri, arrival(), turn.read_resource(uri, server, request_id=rid))
        return await _answer(self, pending, rid)

    async def list_prompts(self: _Api, sid: str, tid: str) -> TrioResponse:
        turn = self._turn(sid, tid)
        return self._json({"turn_id": turn.id, "epoch": turn.epoch, "prompts": turn.prompt_listing()})

    async def get_prompt(self: _Api, sid: str, tid: str) -> TrioResponse:
        turn = self._turn(sid, tid)
        data = await body()
        prompt_id = bodies.string(data, "id")
        assert prompt_id is not None
        arguments = _object(data, "arguments", required=False)
        rid = bodies.request_id(data)
        pending = traced(
            "prompts/get", prompt_id, arrival(), turn.get_prompt(prompt_id, arguments, request_id=rid)
        )
        return await _answer(self, pending, rid)

    async def complete(self: _Api, sid: str, tid: str) -> TrioResponse:
        turn = self._turn(sid, tid)
        data = await body()
        ref = _object(data, "ref", required=True)
        argument = _object(data, "argument", required=True)
        context = _object(data, "context", required=False)
        assert ref is not None and argument is not None
        target = str(ref.get("name") or ref.get("uri") or "")
        return await _answer(
            self,
            traced("completion/complete", target, arrival(), turn.complete(ref, argument, context)),
            None,
        )

    async def subscribe(self: _Api, sid: str) -> TrioResponse:
        session = self._session(sid)
        uri, server = await _subscription()
        return self._json((await session.subscribe(uri, server)).as_dict())

    async def unsubscribe(self: _Api, sid: str) -> TrioResponse:
        session = self._session(sid)
        uri, server = await _subscription()
        return self._json((await session.unsubscribe(uri, server)).as_dict())
