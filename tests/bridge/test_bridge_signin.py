"""Sign-in on ``/v1/bridge``: an issuer's access token in Authorization, as the token
subprotocol or in the first ``auth`` frame, like a static token; a signed-in peer
(the peer role, from its scopes) may register; a refused token is a 401 naming why,
with the challenge pointing at the admin API's metadata."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from actors.protocol import bridge_envelope as env
from supervisor.bridge.gate import SUBPROTOCOL, TOKEN_PREFIX
from supervisor.settings.model import Config
from supervisor.settings.signin import SigninSettings
from tests.support.admin import admin_running
from tests.support.bridge import Client, exported, ws_url
from tests.support.idp import RESOURCE, idp_running
from tests.web.test_signin import issuer_of


async def test_a_signed_in_client_and_peer_use_the_bridge(tmp_path: Path) -> None:
    async with idp_running() as idp:
        config = Config(servers=(exported("mini"),), signin=SigninSettings(RESOURCE, (issuer_of(idp),)))
        async with admin_running(config, tmp_path) as running:
            url, token = ws_url(running), idp.token()
            with trio.fail_after(15):
                async with open_websocket_url(
                    url, extra_headers=[(b"authorization", f"Bearer {token}".encode())]
                ) as ws:
                    await Client(ws).open("mini")
                async with open_websocket_url(url, subprotocols=[SUBPROTOCOL, TOKEN_PREFIX + token]) as ws:
                    assert ws.subprotocol == SUBPROTOCOL
                    await Client(ws).open("mini")
                async with open_websocket_url(url) as ws:  # the first frame
                    client = Client(ws)
                    await client.send(env.auth(token))
                    await client.open("mini")
                async with open_websocket_url(url) as ws:  # a first frame with a bad token: the reason
                    client = Client(ws)
                    await client.send(env.auth(idp.token(aud="https://other.example")))
                    error = await client.next()
                    assert error.data["code"] == "unauthorized" and "audience" in error.data["message"]
                    with pytest.raises(ConnectionClosed):
                        await ws.get_message()
                peer = [(b"authorization", f"Bearer {idp.token(scope='mcp:peer')}".encode())]
                async with open_websocket_url(url, extra_headers=peer) as ws:
                    client = Client(ws)
                    await client.send(env.peer_register([("far", "d" * 64)], id="r"))
                    answer, _ = await client.until(lambda f: f.type == env.PEER_REGISTER_RESULT)
                    assert answer.data["servers"] == ["far"], answer
                with pytest.raises(ConnectionRejected) as caught:
                    expired = idp.token(exp=1_000)
                    async with open_websocket_url(
                        url, extra_headers=[(b"authorization", f"Bearer {expired}".encode())]
                    ):
                        pass
                refused = caught.value
                assert refused.status_code == 401 and b"the token expired at" in (refused.body or b"")
                challenge = dict(refused.headers)[b"www-authenticate"].decode()
                assert challenge.startswith(
                    f'Bearer resource_metadata="{RESOURCE}/.well-known/oauth-protected-resource/v1", '
                )
                await running.sup.store.flush()
                rows = await running.sup.store.read(lambda s: s.audit_rows(limit=100))
                opened = {(row.tenant, row.person) for row in rows if row.tool == "bridge:open"}
                assert opened == {("acme", "ada")}  # the signed-in client's sessions are the person's
