"""The ``store`` section: where the store's database is.

``{"url": "postgresql://user:password@host:5432/db"}`` (best as ``${env:}`` or
``${file:}``): a PostgreSQL database, which several supervisors can share. Without it
the store is SQLite in the state directory. The URL's password is a credential: it is
redacted like other secrets, and errors never show it.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from .expansion import Expander
from .model import StoreSettings
from .values import Invalid, check_keys, child, expect_object

SCHEMES = ("postgresql", "postgres")
EXAMPLE = '"postgresql://mcp:${env:PGPASSWORD}@db.internal:5432/mcp"'


def read_store(value: object, path: str, exp: Expander) -> StoreSettings:
    """The store settings at ``path``; none: SQLite in the state directory."""
    obj = expect_object(value, path, 'an object like {"url": ' + EXAMPLE + "}")
    check_keys(obj, path, ("url",))
    if obj.get("url") is None:
        return StoreSettings()
    at = child(path, "url")
    url = exp.text(obj["url"], at, f"a PostgreSQL URL, like {EXAMPLE}")
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        raise Invalid(at, f"not a URL (a bad port or bracket); write it like {EXAMPLE}") from None
    if parts.scheme not in SCHEMES:
        scheme = f"{parts.scheme}://" if parts.scheme else "no scheme"
        raise Invalid(
            at,
            f"a PostgreSQL URL is postgresql://… (or postgres://…), not {scheme}; "
            f"write it like {EXAMPLE}, or remove 'store' to keep SQLite in the state directory",
        )
    secrets = (password, unquote(password)) if password else ()
    return StoreSettings(url=url, secrets=tuple(dict.fromkeys(secrets)))
