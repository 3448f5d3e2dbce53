"""Sign-in's key sets, introspection and a provider that is down.

The key set is fetched on first need, fetched again for an unknown kid at most once
per ``REFETCH_INTERVAL_S`` (a clock the test moves), and bounded; a provider that goes
down after a fetch leaves calls going on with the kept keys (one warning per
episode); one never reached is a 503 with ``Retry-After`` naming the issuer and what
failed. Opaque tokens are introspected with the client's basic auth, kept a while.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest
import trio
from joserfc.jwk import ECKey

from supervisor.settings.signin import Introspection, IssuerSettings, SigninSettings
from supervisor.web.idp_http import IdpUnavailable
from supervisor.web.key_sets import MAX_KEYS, REFETCH_INTERVAL_S, IssuerKeys
from supervisor.web.signin import SignIn
from supervisor.web.token_claims import SigninRefused
from tests.support.idp import RESOURCE, basic, idp_running, rsa_key
from tests.web.test_signin import CALL, calls, issuer_of, signed_in_server


async def test_an_unknown_kid_refetches_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    async with idp_running() as idp:
        keys = IssuerKeys(issuer_of(idp, jwks_uri=f"{idp.issuer}/jwks"), clock=lambda: now[0])
        assert [k.kid for k in (await keys.key_set("k1")).keys] == ["k1"] and idp.hits["/jwks"] == 1
        idp.published = [idp.key, rsa_key("k3")]  # the provider rotates in a new key
        for _ in range(50):  # a flood of unknown kids within the interval: no fetch
            await keys.key_set("random")
        assert idp.hits["/jwks"] == 1
        now[0] += REFETCH_INTERVAL_S
        assert "k3" in [k.kid for k in (await keys.key_set("k3")).keys] and idp.hits["/jwks"] == 2
        await keys.key_set("k3")  # held now: no fetch
        assert idp.hits["/jwks"] == 2
        now[0] += REFETCH_INTERVAL_S
        async with trio.open_nursery() as nursery:  # at once, after the interval: one fetch for all
            for n in range(20):
                nursery.start_soon(keys.key_set, f"random{n}")
        assert idp.hits["/jwks"] == 3

        idp.down = True  # away: the kept keys go on, one warning per episode
        with caplog.at_level(logging.WARNING, logger="supervisor.signin"):
            for _ in range(3):  # each round: five at once, one failed fetch, the kept keys
                now[0] += REFETCH_INTERVAL_S
                async with trio.open_nursery() as nursery:
                    for n in range(5):
                        nursery.start_soon(keys.key_set, f"other{n}")
                assert "k3" in [k.kid for k in (await keys.key_set("other")).keys]
        warned = [r for r in caplog.records if "identity provider unreachable" in r.getMessage()]
        assert len(warned) == 1 and idp.hits["/jwks"] == 6
        idp.down = False
        many = range(MAX_KEYS + 1)
        idp.published = [ECKey.generate_key("P-256", parameters={"kid": f"k{i}"}) for i in many]
        now[0] += REFETCH_INTERVAL_S
        kept = [k.kid for k in (await keys.key_set("k40")).keys]  # too many keys: not taken
        assert idp.hits["/jwks"] == 7 and "k40" not in kept and "k3" in kept


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_provider_never_reached_is_a_503_naming_why(tmp_path: Path) -> None:
    async with idp_running() as idp:
        gone = f"http://127.0.0.1:{closed_port()}/jwks"
        for jwks_uri, reason in (
            (gone, "connection refused"),
            (f"{idp.issuer}/nowhere", "answered HTTP 404"),
        ):
            issuer = issuer_of(idp, jwks_uri=jwks_uri)
            async with signed_in_server(tmp_path / reason.replace(" ", "_"), issuer) as api:
                with trio.fail_after(10):
                    reply = await api.http(idp.token()).request("POST", "/mcp", json=CALL)
            assert reply.status == 503 and reply.headers["retry-after"] == "30", reply
            message = reply.json()["error"]["message"]
            assert f"issuer {idp.issuer}: the JWK set at" in message and reason in message, message
        signin = SignIn(SigninSettings(RESOURCE, (issuer_of(idp, jwks_uri=f"{idp.issuer}/introspect"),)))
        with pytest.raises(IdpUnavailable, match="the JWK set has no 'keys' list"):
            await signin.principal_of(idp.token())


async def test_calls_go_on_while_the_provider_is_down_once_its_keys_are_kept(tmp_path: Path) -> None:
    async with idp_running() as idp, signed_in_server(tmp_path, issuer_of(idp)) as api:
        with trio.fail_after(10):
            assert (
                await api.http(idp.token()).request("POST", "/mcp", json=CALL)
            ).status == 400  # no session
            idp.down = True
            fresh = api.http(idp.token(sub="bob"))
            assert (await fresh.request("POST", "/mcp", json=CALL)).status == 400  # admitted: the kept keys
            assert calls(tmp_path) == 0


async def test_opaque_tokens_are_introspected_and_kept(tmp_path: Path) -> None:
    async with idp_running() as idp:
        introspection = Introspection(f"{idp.issuer}/introspect", "mcp-client", "s3cret-value")
        issuer: IssuerSettings = issuer_of(idp, introspection=introspection)
        signin = SignIn(SigninSettings(RESOURCE, (issuer,)))
        later = int(time.time()) + 300
        idp.opaque["opaque-1"] = {
            "active": True,
            "sub": "ada",
            "org": "acme",
            "aud": RESOURCE,
            "exp": later,
            "scope": "mcp:admin",
        }
        idp.opaque["opaque-2"] = {"active": True, "sub": "bob", "org": "acme", "aud": "https://other.example"}
        who = await signin.principal_of("opaque-1")
        assert (who.tenant, who.person, who.role.value, who.token) == ("acme", "ada", "operator", "opaque-1")
        assert "opaque-1" not in repr(who)
        await signin.principal_of("opaque-1")  # kept: not asked again
        assert idp.hits["/introspect"] == 1 and idp.introspection_auth == [
            basic("mcp-client", "s3cret-value")
        ]
        with pytest.raises(SigninRefused, match="not active"):
            await signin.principal_of("revoked")
        with pytest.raises(SigninRefused, match=r"audience is https://other\.example"):
            await signin.principal_of("opaque-2")
        idp.down = True
        with pytest.raises(IdpUnavailable, match=r"token introspection .* answered HTTP 500"):
            await signin.principal_of("opaque-3")
