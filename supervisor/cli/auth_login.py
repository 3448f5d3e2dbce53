"""``mcp-supervisor auth login SERVER``: a person authorizes a remote server once.

The flow (MCP authorization, OAuth 2.1 with PKCE): an unauthenticated probe of the
server gives the ``WWW-Authenticate`` challenge; discovery and client registration
follow; the authorization URL is printed and a listener on ``127.0.0.1`` (a free port)
takes the browser's redirect, whose ``state`` must match; the code is exchanged and the
tokens stored in the state directory's ``supervisor.db`` (mode 0600), where a running
or later ``serve`` finds them. A running service is then asked to restart the server,
which leaves the ``needs_auth`` condition. Writing the state directory needs no admin
role (file access there is the gate); the restart is server control, so it needs an
operator token, and with any other the service's 403 is shown with the advice to
restart the server there.

A ``per_user`` server is signed in to per person: ``--user PERSON`` stores that person's
own tokens (their row alone), and a running service restarts that person's connection
only (``POST /v1/servers/{name}/restart?person=…``), which reads them anew.

Exit status: 0 authorized, 1 the flow failed, 2 bad usage (unknown server, no ``oauth``,
``--user`` missing for a ``per_user`` server or given for a shared one).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from urllib.parse import urlencode

import httpx2
import orjson
import trio

from actors.auth.authorizers import LoopbackAuthorizer
from actors.auth.http import tls_transport
from actors.auth.provider import OAuthProvider, OAuthSettings
from actors.protocol.messages import LATEST_PROTOCOL_VERSION
from actors.redaction import Redactor
from actors.spec import Credentials, ServerSpec
from actors.tls import tls_refusal
from actors.transport_errors import TransportError
from supervisor.cli.client import TOKEN_ENV_VAR, AdminClient, ClientError, Unreachable
from supervisor.runtime.state_dir import open_store, resolve_state_dir
from supervisor.settings.model import Config
from supervisor.store.vault import StoreVault

PROBE = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-supervisor auth login", "version": "1"},
        },
    }
)


class LoginError(Exception):
    """The login cannot start or did not finish; the text says why (exit 1, or 2 for usage)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def remote_spec(config: Config, name: str) -> ServerSpec:
    """The configured remote server ``name`` with an ``oauth`` block."""
    spec = next((s for s in config.servers if s.name == name), None)
    if spec is None:
        known = ", ".join(s.name for s in config.servers if s.type == "remote") or "none"
        where = config.source or "the config"
        raise LoginError(f"no server {name!r} in {where} (remote servers: {known})", 2)
    if spec.type != "remote" or spec.url is None:
        raise LoginError(f"mcp server {name} is not a remote server; only remote servers use OAuth", 2)
    if spec.oauth is None:
        raise LoginError(f'mcp server {name} has no "oauth" block; add "oauth": {{}} to it in the config', 2)
    return spec


async def probe(spec: ServerSpec) -> str | None:
    """The server's ``WWW-Authenticate`` for a request without a token (None if none)."""
    assert spec.url is not None
    headers = {
        **spec.headers,
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    headers.pop("Authorization", None)
    try:
        async with httpx2.AsyncClient(
            follow_redirects=False, timeout=spec.init_timeout_s, transport=tls_transport(spec.name, spec.tls)
        ) as http:
            response = await http.post(spec.url, content=PROBE, headers=headers)
    except httpx2.HTTPError as exc:
        refusal = tls_refusal(exc)
        reason = refusal.text if refusal is not None else type(exc).__name__
        raise LoginError(f"mcp server {spec.name}: cannot reach it: {reason}") from None
    return response.headers.get("www-authenticate") if response.status_code in (401, 403) else None


async def login(
    config: Config,
    name: str,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    show: Callable[[str], None] = print,
    timeout_s: float = 300.0,
    admin_url: str | None = None,
    admin_token: str | None = None,
    user: str | None = None,
) -> None:
    """Run the flow for server ``name`` (``user``'s own, for a ``per_user`` one) and store
    its tokens; raises LoginError."""
    spec = remote_spec(config, name)
    assert spec.url is not None
    check_user(spec, user)
    redactor = Redactor(config.secrets)
    state_path = resolve_state_dir(config, state_dir)
    store = await trio.to_thread.run_sync(open_store, state_path, config)
    try:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        async with listeners[0] as listener:

            def show_url(url: str) -> None:
                show(f"To authorize mcp server {name}, open this URL in a browser:\n\n  {url}\n")
                show(f"Waiting for the redirect to {authorizer.redirect_uri} ...")

            authorizer = LoopbackAuthorizer(listener, show_url, timeout_s=timeout_s)
            settings = OAuthSettings.from_mapping(spec.oauth)
            vault = StoreVault(store) if user is None else StoreVault(store).for_person(user)
            provider = OAuthProvider(
                name, spec.url, settings, vault, authorizer, transport=tls_transport(name, spec.tls)
            )
            challenge = await probe(spec)
            try:
                await provider.login(challenge)
            except TransportError as exc:
                raise LoginError(redactor.redact(str(exc))) from None
    finally:
        store.close()
    whose = "its tokens are" if user is None else f"{user}'s own tokens are"
    show(f"Authorized mcp server {name}; {whose} stored in {state_path / 'supervisor.db'}.")
    await trio.to_thread.run_sync(_tell_service, name, admin_url, admin_token, show, user)


def check_user(spec: ServerSpec, user: str | None) -> None:
    """``--user`` names whose sign-in it is: needed for a ``per_user`` server, and only there."""
    per_user = spec.credentials is Credentials.PER_USER
    if per_user and not user:
        raise LoginError(
            f"mcp server {spec.name} is per_user (each person signs in for themselves): say whose "
            "sign-in this is with --user PERSON",
            2,
        )
    if user is not None and not per_user:
        raise LoginError(
            f"mcp server {spec.name} is shared (one sign-in for everyone): drop --user, or set its "
            '"credentials": "per_user" in the config',
            2,
        )


def _tell_service(
    name: str, url: str | None, token: str | None, show: Callable[[str], None], user: str | None = None
) -> None:
    """Ask a running service to restart the server (a person's connection of it), so it
    leaves ``needs_auth`` now."""
    if url is None:
        return
    token = token if token is not None else os.environ.get(TOKEN_ENV_VAR)
    path = f"/v1/servers/{name}/restart" + ("" if user is None else f"?{urlencode({'person': user})}")
    try:
        AdminClient(url, token, 5.0).request("POST", path)
    except Unreachable:
        show(f"No supervisor answers at {url}; the next `serve` uses the tokens.")
    except ClientError as exc:
        show(f"The supervisor at {url} did not restart {name} ({exc}); restart it there to use the tokens.")
    else:
        show(f"Restarted {name} in the supervisor at {url}.")


def run(config: Config, args_server: str, state_dir: str | None, url: str | None, token: str | None,
        timeout_s: float, user: str | None = None) -> int:  # fmt: skip
    """The CLI command; returns the exit status."""
    try:
        trio.run(
            lambda: login(
                config, args_server, state_dir=state_dir, timeout_s=timeout_s,
                admin_url=url, admin_token=token, show=lambda s: print(s, flush=True), user=user,
            )
        )  # fmt: skip
    except LoginError as exc:
        print(f"mcp-supervisor auth login: {exc}", file=sys.stderr)
        return exc.status
    return 0
