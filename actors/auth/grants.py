"""The token-request forms of the grants that need no browser.

Client credentials, cross-app access (SEP-990: an ID-JAG got from the identity provider
by token exchange, then sent as a JWT-bearer assertion), a workload's JWT-bearer
assertion (RFC 7523), and token exchange (RFC 8693) of a signed-in person's own token.
:class:`~actors.auth.flows.OAuthFlows` sends them with the client's authentication;
here is only what each grant puts in its form.
"""

from __future__ import annotations

import httpx2

from actors.auth.discovery import canonical_resource
from actors.auth.errors import auth_failed
from actors.auth.http import AuthServerHttp
from actors.auth.jwt_bearer import workload_assertion
from actors.auth.records import AuthRecord
from actors.auth.settings import OAuthSettings

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


def exchange_form(subject_token: str, subject_token_type: str, scope: str | None) -> dict[str, str]:
    """RFC 8693 §2.1: the person's token as ``subject_token``, an access token for this
    server wanted back (the ``resource`` is added with the client's authentication)."""
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": subject_token,
        "subject_token_type": subject_token_type,
        "requested_token_type": ACCESS_TOKEN_TYPE,
    }
    if scope:
        form["scope"] = scope
    return form


async def headless_form(
    server: str,
    url: str,
    settings: OAuthSettings,
    record: AuthRecord,
    poster: AuthServerHttp,
    http: httpx2.AsyncClient,
    scope: str | None,
) -> dict[str, str]:
    """The form of a headless flow (``settings.flow``): a token without a person."""
    if settings.flow == "cross_app_access":
        form = {
            "grant_type": JWT_BEARER_GRANT,
            "assertion": await _id_jag(server, url, settings, record, poster, http, scope),
        }
    elif settings.flow == "jwt_bearer":
        form = {"grant_type": JWT_BEARER_GRANT, "assertion": await workload_assertion(server, settings)}
    else:
        form = {"grant_type": "client_credentials"}
    if scope:
        form["scope"] = scope
    return form


async def _id_jag(
    server: str,
    url: str,
    settings: OAuthSettings,
    record: AuthRecord,
    poster: AuthServerHttp,
    http: httpx2.AsyncClient,
    scope: str | None,
) -> str:
    """SEP-990: exchange the user's ID token at the identity provider (RFC 8693) for
    an identity assertion grant (ID-JAG) addressed to this authorization server."""
    if not settings.idp_token_endpoint or not settings.id_token:
        raise auth_failed(server, 'cross_app_access needs "idp_token_endpoint" and "id_token"')
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG_TYPE,
        "subject_token": settings.id_token,
        "subject_token_type": ID_TOKEN_TYPE,
        "audience": record.issuer or record.token_endpoint,
        "resource": record.resource or canonical_resource(url),
    }
    if scope:
        form["scope"] = scope
    if settings.idp_client_id:
        form["client_id"] = settings.idp_client_id
    if settings.idp_client_secret:
        form["client_secret"] = settings.idp_client_secret
    doing = "the token exchange at the identity provider"
    answer = await poster.post(http, settings.idp_token_endpoint, doing, data=form)
    assertion = answer.get("access_token")
    if not isinstance(assertion, str) or not assertion:
        raise auth_failed(server, "the identity provider's token exchange answered without a token")
    return assertion
