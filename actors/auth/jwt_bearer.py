"""The workload-identity JWT-bearer grant (RFC 7523 §2.1; MCP SEP-1933).

A workload (a Kubernetes pod, a cloud VM, a CI job) gets a signed JWT from its platform
that says who it is, audienced to the authorization server. The ``jwt_bearer`` flow sends
it as the ``assertion`` of a ``urn:ietf:params:oauth:grant-type:jwt-bearer`` token
request, with no person in the loop, the way ``client_credentials`` works; when the
token expires the grant runs again. We do not sign it: the platform does.

The assertion is configured as ``assertion`` (a value, usually ``${env:NAME}``) or
``assertion_file`` (a path, read again for every grant, because platforms rotate these
tokens in place, e.g. a projected service-account token). It is a secret: never logged,
never in an error text. A refused grant fails the flow (``needs_auth``): we neither retry
it nor fall back to another grant.
"""

from __future__ import annotations

import os
import stat

import trio

from actors.auth.errors import auth_failed
from actors.auth.settings import OAuthSettings
from actors.transport_errors import AuthRequired

MAX_ASSERTION_BYTES = 64 * 1024  # platform tokens are a few KiB


async def workload_assertion(server: str, settings: OAuthSettings) -> str:
    """The assertion to send now; AuthRequired (auth_failed) naming what is wrong."""
    if settings.assertion_file:
        path = settings.assertion_file
        try:
            data = await trio.to_thread.run_sync(_read_bounded, path)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise _unusable(server, f"the assertion_file {path} cannot be read ({reason})") from None
        try:
            text = data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise _unusable(server, f"the assertion_file {path} is not a JWT (not ASCII)") from None
        if not text:
            raise _unusable(server, f"the assertion_file {path} is empty")
        return text
    if settings.assertion:
        return settings.assertion.strip()
    raise _unusable(server, 'the jwt_bearer flow needs "assertion" or "assertion_file"')


def _unusable(server: str, detail: str) -> AuthRequired:
    return auth_failed(server, f"no workload identity: {detail}")


def _read_bounded(path: str) -> bytes:
    """A regular file's bytes, at most ``MAX_ASSERTION_BYTES`` (a FIFO or a device is
    refused before it is read: it would block, or never end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        data = os.read(fd, MAX_ASSERTION_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_ASSERTION_BYTES:
        raise OSError(0, f"larger than {MAX_ASSERTION_BYTES} bytes")
    return data
