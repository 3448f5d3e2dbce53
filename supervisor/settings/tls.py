"""A remote server's ``tls`` block: mutual TLS, read and checked at load time.

``"tls": {"cert": ..., "key": ..., "ca": ...}``; each value is either a path (relative
to the config file's directory, ``~`` allowed) or the PEM text itself, which is what a
``${file:…}`` or ``${env:…}`` reference gives: a value holding ``-----BEGIN`` is PEM,
anything else a path. ``cert`` and ``key`` go together (our client certificate); ``ca``
alone replaces the system's trusted CAs for this server. Either way the files are read
once, here, so a missing file, a key that does not match its certificate or an
encrypted key stops the start with the field's JSON path, not later as a failed
handshake. The key's text joins the server's secrets (redacted everywhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from actors.tls import PEM_MARK, ClientTls, TlsProblem

from .expansion import Expander
from .values import Invalid, check_keys, child, expect_object

__all__ = ["read_tls"]

FIELDS = ("cert", "key", "ca")
_SHAPE = 'an object like {"cert": "client.crt", "key": "client.key", "ca": "ca.crt"}'


def read_tls(entry: Mapping[str, Any], url: str | None, path: str, exp: Expander) -> ClientTls | None:
    """The entry's ``tls`` block as PEM texts, checked by building its SSL context."""
    if "tls" not in entry:
        return None
    where = child(path, "tls")
    block = expect_object(entry["tls"], where, _SHAPE)
    check_keys(block, where, FIELDS)
    if not block:
        raise Invalid(where, "the block is empty; give 'cert' and 'key' (a client certificate), 'ca' or all")
    scheme = urlsplit(url or "").scheme.lower()
    if scheme != "https":
        raise Invalid(
            where, f"'tls' applies to https:// urls only, this is {scheme}://; use https:// or remove 'tls'"
        )
    pems = {field: _pem(block[field], child(where, field), exp) for field in FIELDS if field in block}
    if "key" in pems:
        exp.secrets.append(pems["key"])
    tls = ClientTls(cert=pems.get("cert"), key=pems.get("key"), ca=pems.get("ca"))
    try:
        tls.context()
    except TlsProblem as exc:
        raise Invalid(child(where, exc.field), exc.problem) from None
    return tls


def _pem(raw: object, where: str, exp: Expander) -> str:
    """PEM text, given as such (after expansion) or as the path of a file holding it."""
    text = exp.text(raw, where, "a file path or PEM text")
    if PEM_MARK in text:
        return text
    if not text.strip():
        raise Invalid(where, "the value is empty; give a file path or PEM text")
    if isinstance(raw, str) and "${file:" in raw:
        raise Invalid(
            where,
            "the reference did not give PEM text (no '-----BEGIN' line); point ${file:…} at a PEM "
            "file, or write the file's path itself",
        )
    content = exp.read_file(text, where)
    if PEM_MARK not in content:
        raise Invalid(where, f"{text} holds no PEM text (no '-----BEGIN' line); convert it to PEM")
    return content
