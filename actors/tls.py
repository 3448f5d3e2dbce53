"""Mutual TLS for a remote server: our client certificate, and the CA we trust for it.

A remote server's ``tls`` block (``{"cert", "key", "ca"}``) reaches the actors as
:class:`ClientTls`, holding PEM text (the config loader reads paths and ``${file:…}``
references alike). :meth:`ClientTls.context` builds the ``ssl.SSLContext`` that the
transports' HTTP client and the server's OAuth client both use, so the MCP endpoint and
the authorization server it names are reached with the same identity.

Python's ``ssl`` loads a certificate chain only from files, so the PEM text is handed
to it through an anonymous in-memory file (``memfd_create``; where that is missing, a
private temporary file removed at once): the private key never lands in a named file
of ours. The key is a secret: it is kept out of ``repr()``, out of every error text
(they name the field and OpenSSL's reason, never content), and the loader adds it to
the server's secrets for redaction.

:func:`tls_refusal` reads what a failed handshake says, so a refused client
certificate or an untrusted server certificate is reported as such, with the fix.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator

import attrs

from actors.transport_errors import AuthRequired, TransportError

__all__ = [
    "PEM_MARK",
    "TLS_REFUSED",
    "ClientTls",
    "TlsProblem",
    "TlsRefusal",
    "hang_up_hint",
    "server_context",
    "tls_refusal",
]

PEM_MARK = "-----BEGIN "
"""What every PEM text holds; a ``tls`` value without it is a path to read."""

TLS_REFUSED = 495
"""The ``AuthRequired.status`` of a refused client certificate: there is no HTTP answer,
so nginx's "SSL Certificate Error" code stands in for one."""


class TlsProblem(ValueError):
    """One field of a ``tls`` block cannot be used; ``field`` is ``cert``, ``key`` or ``ca``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"tls.{field}: {problem}")
        self.field = field
        self.problem = problem


class _Encrypted(Exception):
    """Raised by the passphrase callback: OpenSSL would otherwise prompt on the terminal."""


def _no_passphrase() -> bytes:
    raise _Encrypted


@attrs.frozen(slots=True, repr=False)
class ClientTls:
    """PEM texts: ``cert`` (our certificate, maybe with its chain) and ``key`` (its
    private key) go together; ``ca`` alone replaces the system's trusted CAs for this
    server (and its OAuth endpoints)."""

    cert: str | None = None
    key: str | None = None
    ca: str | None = None

    def __repr__(self) -> str:
        key = "<hidden>" if self.key is not None else "None"
        return f"ClientTls(cert={_present(self.cert)}, key={key}, ca={_present(self.ca)})"

    @property
    def summary(self) -> str:
        """What ``check`` shows: ``mutual tls`` with a client certificate, else ``tls ca``."""
        return "mutual tls" if self.cert is not None else "tls ca"

    def context(self) -> ssl.SSLContext:
        """A client context that verifies the server (against ``ca`` when given) and
        presents our certificate; raises :class:`TlsProblem` naming the field."""
        if (self.cert is None) != (self.key is None):
            missing = "key" if self.key is None else "cert"
            raise TlsProblem(missing, "a client certificate needs both 'cert' and 'key'; give the other one")
        if self.ca is not None:
            try:
                ctx = ssl.create_default_context(cadata=self.ca)
            except (ssl.SSLError, ValueError) as exc:
                raise TlsProblem("ca", f"not a usable PEM CA certificate ({_reason(exc)})") from None
        else:
            import httpx2  # here: `import supervisor` stays free of the HTTP client

            ctx = httpx2.create_ssl_context()
        if self.cert is not None and self.key is not None:
            _load_chain(ctx, self.cert, self.key)
        return ctx


def server_context(server: str, tls: ClientTls | None) -> ssl.SSLContext | None:
    """The context for a server's HTTP clients (None: httpx's default); a ``tls`` block
    built by hand that does not load is a TransportError naming the server and field."""
    if tls is None:
        return None
    try:
        return tls.context()
    except TlsProblem as exc:
        raise TransportError(f"mcp server {server}: {exc}; fix the server's tls block") from None


def _present(pem: str | None) -> str:
    return "None" if pem is None else "<PEM>"


def _reason(exc: BaseException) -> str:
    """OpenSSL's reason code (never content): ``KEY_VALUES_MISMATCH``, ``NO_START_LINE``."""
    reason = getattr(exc, "reason", None)
    return str(reason) if reason else type(exc).__name__


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str) -> None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=cert)
    except (ssl.SSLError, ValueError) as exc:
        raise TlsProblem("cert", f"not a usable PEM certificate ({_reason(exc)})") from None
    with _pem_file(cert) as cert_path, _pem_file(key) as key_path:
        try:
            ctx.load_cert_chain(cert_path, key_path, password=_no_passphrase)
        except _Encrypted:
            raise TlsProblem(
                "key",
                "the private key is encrypted and passphrases are not supported; decrypt it "
                "(openssl pkey -in key.pem -out plain.pem) and keep that file private",
            ) from None
        except ssl.SSLError as exc:
            if exc.reason == "KEY_VALUES_MISMATCH":
                mismatch = "the private key does not match the certificate in 'cert'; give the cert's own key"
                raise TlsProblem("key", mismatch) from None
            raise TlsProblem("key", f"not a usable PEM private key ({_reason(exc)})") from None


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """A path that reads as ``text`` for the block: an anonymous in-memory file where
    the OS has one, else a private (0600) temporary file, removed at once."""
    data = text.encode("utf-8")
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd("mcp-supervisor-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="mcp-supervisor-tls-")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        yield path
    finally:
        os.unlink(path)


@attrs.frozen(slots=True)
class TlsRefusal:
    """What a failed TLS handshake meant: ``ours`` is True when the server refused our
    client certificate (an authentication failure), False when we refused its certificate."""

    ours: bool
    text: str

    def refused_ours(self, server: str, what: str | None = None) -> AuthRequired:
        """Our certificate, refused (``ours``): calls end ``auth_failed``, and the
        connection retries on its schedule, as a fixed certificate or server needs no
        ``auth login`` (so not ``needs_login``). ``what`` names an OAuth step."""
        detail = self.text if what is None else f"{what} failed: {self.text}"
        return AuthRequired(server, TLS_REFUSED, detail=detail)


# OpenSSL reasons for a server that refused (or wanted) our client certificate.
_REFUSED_OURS = (
    "CERTIFICATE_REQUIRED",
    "BAD_CERTIFICATE",
    "UNKNOWN_CA",
    "CERTIFICATE_UNKNOWN",
    "CERTIFICATE_EXPIRED",
    "CERTIFICATE_REVOKED",
    "UNSUPPORTED_CERTIFICATE",
    "ACCESS_DENIED",
)


def tls_refusal(exc: BaseException) -> TlsRefusal | None:
    """The TLS meaning of a connection error (None: not a TLS refusal), from the
    ``ssl.SSLError`` somewhere in its cause chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            detail = current.verify_message or _reason(current)
            return TlsRefusal(
                False,
                f"its TLS certificate is not trusted ({detail}); set tls.ca to the CA that signed it",
            )
        if isinstance(current, ssl.SSLError):
            reason = str(current.reason or "")
            if "ALERT" in reason and any(word in reason for word in _REFUSED_OURS):
                return TlsRefusal(
                    True,
                    f"it refused our TLS client certificate ({reason}); "
                    "check tls.cert and tls.key (a certificate its CA signed, not expired)",
                )
            return None
        current = current.__cause__ or current.__context__
    return None


def hang_up_hint(tls: ClientTls | None) -> str:
    """What a server that hung up on an https request without answering may mean.

    Servers that check client certificates after the TLS 1.3 handshake often close the
    connection without sending their alert (Python's asyncio and Trio servers do), so
    the client sees only the hang-up: name the likely cause, as a likelihood."""
    if tls is None or tls.cert is None:
        return "a server that requires a TLS client certificate hangs up like this: set tls.cert and tls.key"
    return "a server that refuses our TLS client certificate hangs up like this: check tls.cert and tls.key"
