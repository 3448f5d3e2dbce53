"""A small identity provider on loopback for the sign-in tests: a JWK set, OpenID
discovery and token introspection, served by Hypercorn, with keys made at run time.

``Idp.token(...)`` mints an access token signed with its key (or with another key, an
HMAC, none: what the refusal tests need); the provider counts every request it
answers by path, and can be told to fail (``down``) to act as a provider that is away.
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import hypercorn.config
import hypercorn.trio
import trio
from joserfc import jwt
from joserfc.jwk import RSAKey

RESOURCE = "https://mcp.example.com"


def rsa_key(kid: str) -> RSAKey:
    """A fresh private RSA key named ``kid``."""
    return RSAKey.generate_key(2048, parameters={"kid": kid}, private=True)


@attrs.define
class Idp:
    """The provider's state; ``issuer`` is its URL (``http://127.0.0.1:<port>``)."""

    issuer: str = ""
    key: RSAKey = attrs.field(
        factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
    )
    published: list[Any] = attrs.field(factory=list)
    """The keys of the JWK set it serves (its own key at first)."""
    opaque: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    """Opaque token → its introspection answer."""
    hits: Counter[str] = attrs.field(factory=Counter)
    down: bool = False
    """Answer every request with a 500."""
    introspection_auth: list[str] = attrs.field(factory=list)

    def claims(self, **changes: Any) -> dict[str, Any]:
        """Good claims for ``RESOURCE``, changed (a None value drops the claim)."""
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "ada",
            "aud": RESOURCE,
            "exp": now + 300,
            "iat": now,
            "org": "acme",
        }
        claims.update(changes)
        return {name: value for name, value in claims.items() if value is not None}

    def token(self, *, header: Mapping[str, Any] | None = None, key: Any = None, **changes: Any) -> str:
        """An access token signed RS256 with its key (``header``, ``key``: otherwise)."""
        head = {"alg": "RS256", "kid": "k1", **(header or {})}
        return jwt.encode(head, self.claims(**changes), key or self.key, algorithms=[head["alg"]])

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.as_dict(private=False) for key in (self.published or [self.key])]}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        self.hits[path] += 1
        status, answer = self._answer(path, body, dict(scope["headers"]))
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    def _answer(self, path: str, body: bytes, headers: Mapping[bytes, bytes]) -> tuple[int, Any]:
        if self.down:
            return 500, {"error": "down"}
        if path == "/.well-known/openid-configuration":
            return 200, {"issuer": self.issuer, "jwks_uri": f"{self.issuer}/jwks"}
        if path == "/jwks":
            return 200, self.jwks()
        if path == "/introspect":
            self.introspection_auth.append(headers.get(b"authorization", b"").decode())
            form = dict(pair.split("=", 1) for pair in body.decode().split("&") if "=" in pair)
            return 200, self.opaque.get(form.get("token", ""), {"active": False})
        return 404, {"error": "not_found"}


def basic(client_id: str, secret: str) -> str:
    """The Authorization header of HTTP basic auth."""
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


@asynccontextmanager
async def idp_running() -> AsyncIterator[Idp]:
    """The provider on 127.0.0.1 (a free port), until the block ends."""
    idp = Idp()
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(hypercorn.trio.serve, idp, config)
        idp.issuer = binds[0]
        yield idp
        nursery.cancel_scope.cancel()
