"""Keep credentials out of logs and stderr buffers.

A :class:`Redactor` knows the secret values the config expanded (``${env:…}``,
``${file:…}``) and a few generic shapes that carry credentials whatever their value:

* ``Bearer <token>``                          → ``Bearer ***``
* ``Authorization: <value>`` (header, JSON)   → ``Authorization: ***``
* ``token=…``, ``api_key: …``, ``"client_secret": "…"``, ``?access_token=…`` → value ``***``

Everything runs through one compiled regex, so a line costs one scan. Known secrets are
also allowed *inside* the generic values, so a generic match never stops half-way
through a secret and leaks its tail. Over-redacting (``max_tokens: ***``) is the
accepted price: a log line that says too little is better than one that leaks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

import orjson

MASK = "***"
# Shorter "secrets" would turn ordinary words into asterisks all over the logs.
MIN_SECRET_LEN = 4

_QUOTED = r""""[^"\r\n]*"|'[^'\r\n]*'"""
# Names that mark the value after them as a credential (case-insensitive, anywhere in
# a key such as GITHUB_TOKEN, x-api-key, clientSecret, db_password).
_KEY_WORDS = r"token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|private[_-]?key|credentials?"
_SEP = r"""["']?[ \t]*[:=][ \t]*"""
# Lower-case words without which no generic pattern can match: most lines contain
# none of them (nor a secret) and skip the regex entirely.
_TRIGGERS = ("token", "secret", "passw", "key", "credential", "bearer", "authorization")


def _build_pattern(secrets: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """The main pattern, and a secrets-only pattern for the kept key text of a match."""
    alternatives = "|".join(re.escape(s) for s in secrets)
    # Inside a bare value: a whole known secret, or one ordinary value character.
    in_value = f"{alternatives}|" if secrets else ""
    parts = []
    if secrets:
        parts.append(f"(?P<secret>{alternatives})")
    parts += [
        # Authorization header in any notation: the whole value goes, scheme included.
        rf"(?P<auth_key>(?i:\b(?:proxy-)?authorization){_SEP})"
        rf"(?P<auth_val>{_QUOTED}|[^\r\n\"']+)",
        rf"(?P<bearer_key>(?i:\bbearer)[ \t]+)(?P<bearer_val>(?:{in_value}[\w\-.~+/])+=*)",
        # Key bounded on both sides ({0,32}) so a long word cannot make the scan quadratic.
        rf"(?P<kv_key>(?<![\w.-])[\w.-]{{0,32}}?(?i:{_KEY_WORDS})[\w.-]{{0,32}}{_SEP})"
        rf"(?P<kv_val>{_QUOTED}|(?:{in_value}[^\s\"'&,;])+)",
    ]
    main = re.compile("|".join(parts))
    only_secrets = re.compile(alternatives) if secrets else None
    return main, only_secrets


# Which key group goes with each value group (``Match.lastgroup`` names the value).
_KEY_OF = {"auth_val": "auth_key", "bearer_val": "bearer_key", "kv_val": "kv_key"}


class Redactor:
    """Replaces secret values and credential-shaped text with ``***``.

    Pure and immutable after construction; safe to share between tasks and threads.
    Its ``repr`` never shows the secrets.
    """

    __slots__ = ("_count", "_longest", "_pattern", "_secrets", "_secrets_only")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first: when one secret contains another, the whole of it is masked.
        kept = sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=lambda s: -len(s))
        self._secrets = tuple(kept)
        self._count = len(kept)
        self._longest = len(kept[0]) if kept else 0
        self._pattern, self._secrets_only = _build_pattern(tuple(kept))

    def with_secrets(self, secrets: Iterable[str]) -> Redactor:
        """A redactor that also masks ``secrets`` (a config reload brought new ones;
        the old stay masked: they may still be in a server's output)."""
        return Redactor((*self._secrets, *secrets))

    @property
    def longest_secret(self) -> int:
        """Length of the longest known secret (0 if none); callers that cut text use it
        to keep enough context for a secret at the cut to be recognised whole."""
        return self._longest

    def redact(self, text: str) -> str:
        """Return ``text`` with every secret and credential-shaped value masked."""
        lowered = text.lower()
        # Substring tests run at C speed; the regex costs ~0.2 us per character.
        if not any(word in lowered for word in _TRIGGERS) and not any(
            secret in text for secret in self._secrets
        ):
            return text
        return self._pattern.sub(self._replace, text)

    def redact_json(self, value: object) -> object:
        """A JSON value (a server's error ``data``) with secrets masked: redacted as its
        JSON text, so ``{"client_secret": "…"}`` is caught as in a log line; None when
        it is not JSON, or masking broke it."""
        if value is None:
            return None
        try:
            return orjson.loads(self.redact(orjson.dumps(value).decode()))
        except (TypeError, orjson.JSONDecodeError):
            return None

    def _replace(self, match: re.Match[str]) -> str:
        value_group = match.lastgroup
        if value_group is None or value_group == "secret":
            return MASK
        key = match.group(_KEY_OF[value_group])
        if self._secrets_only is not None:
            # A secret may hide inside the key text we keep (e.g. "<secret>_token=…").
            key = self._secrets_only.sub(MASK, key)
        value = match.group(value_group)
        if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
            return f"{key}{value[0]}{MASK}{value[0]}"
        return key + MASK

    def __repr__(self) -> str:
        return f"Redactor(<{self._count} secrets>)"


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment: fit for logs and error texts."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
    except ValueError:
        return "<invalid url>"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
