"""The console behind the shipped proxy file (a real nginx, ``config/examples/nginx.conf``):
nginx passes ``Host`` without a non-default port, so the browser's ``Origin`` (with the
port) is the console's own only once ``console.allowed_origins`` lists it; another
site's origin is refused all the same. Behind TLS (``X-Forwarded-Proto: https``) the
session cookie is ``Secure``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import attrs
import trio

from supervisor import Supervisor
from supervisor.server import serve
from supervisor.settings.console import ConsoleSettings
from tests.console.test_console_http import FORM, OPS, TOKENS
from tests.support.admin import Http, config_of, mini_spec
from tests.support.http_processes import free_port
from tests.support.nginx import needs_nginx, running_nginx


async def sign_in(http: Http, origin: str, host: str | None = None, **extra: str) -> tuple[int, str]:
    answer = await http.request(
        "POST",
        "/ui/login",
        body=urlencode({"token": OPS}).encode(),
        headers={"Origin": origin, **FORM, **extra},
        host=host,
    )
    return answer.status, answer.headers.get("set-cookie", "")


async def test_through_nginx_the_console_takes_its_listed_origin_and_no_other(tmp_path: Path) -> None:
    needs_nginx()
    backend = free_port()
    async with running_nginx({"r1": backend}, tmp_path / "nginx") as nginx:
        proxied = f"http://127.0.0.1:{nginx.port}"
        console = ConsoleSettings(allowed_origins=(proxied,))
        config = attrs.evolve(config_of(mini_spec("mini"), tokens=TOKENS), console=console)
        async with (
            Supervisor.open(config, state_dir=tmp_path / "state") as sup,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(serve, sup, f"127.0.0.1:{backend}")
            with trio.fail_after(20):
                http = Http(proxied)
                assert await sign_in(http, "http://evil.example") == (403, "")
                status, cookie = await sign_in(http, proxied)
                assert status == 303 and "Secure" not in cookie  # plain HTTP to nginx
                session = cookie.split(";")[0]
                page = await http.request("GET", "/ui", headers={"Cookie": session})
                assert page.status == 200 and b'data-server="mini"' in page.body
                csrf = page.body.decode().split('data-csrf="', 1)[1].split('"', 1)[0]
                act = {"Cookie": session, "X-CSRF-Token": csrf}
                refused = await http.request(
                    "POST", "/ui/act/restart/mini", headers={**act, "Origin": "http://x.example"}
                )
                assert refused.status == 403
                done = await http.request("POST", "/ui/act/restart/mini", headers={**act, "Origin": proxied})
                assert done.status in (200, 202), done
            nursery.cancel_scope.cancel()


async def test_without_the_listing_a_portless_host_refuses_and_tls_makes_the_cookie_secure(
    tmp_path: Path,
) -> None:
    config = config_of(mini_spec("mini"), tokens=TOKENS)
    async with Supervisor.open(config, state_dir=tmp_path / "state") as sup, trio.open_nursery() as nursery:
        url = await nursery.start(serve, sup, "127.0.0.1:0")
        http = Http(url)
        port = url.rsplit(":", 1)[1]
        with trio.fail_after(20):
            # As nginx's `Host $host` passes a browser's request to port 8100 on: no port.
            assert (await sign_in(http, "http://127.0.0.1:8100", "127.0.0.1"))[0] == 403
            # TLS ended in front (X-Forwarded-Proto): the cookie is sent over HTTPS only.
            origin = f"https://localhost:{port}"
            status, cookie = await sign_in(
                http, origin, f"localhost:{port}", **{"X-Forwarded-Proto": "https"}
            )
            assert status == 303 and "; Secure" in cookie, cookie
        nursery.cancel_scope.cancel()
