"""The secret scrubber: the config's exact secret values masked in every answer.

Everything an app of ``serve`` sends passes it: a tool that echoes its environment, an
argument that holds a token. Exact values only, without the Redactor's generic
patterns, which would mangle ordinary tool output such as ``"max_tokens": 5``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from actors.redaction import MASK, MIN_SECRET_LEN


class SecretScrubber:
    """Masks known secret values in every string (keys included) of a JSON value."""

    __slots__ = ("_pattern", "_secrets")

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self.learn(secrets)

    def learn(self, secrets: Iterable[str]) -> None:
        """Mask ``secrets`` too (a config reload brought them; the old stay masked)."""
        self._secrets |= {s for s in secrets if len(s) >= MIN_SECRET_LEN}
        kept = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, kept))) if kept else None

    def text(self, value: str) -> str:
        """``value`` with every known secret replaced by ``***``."""
        return value if self._pattern is None else self._pattern.sub(MASK, value)

    def scrub(self, value: Any) -> Any:
        """A copy of a JSON-ready value with every string scrubbed."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(item) for item in value]
        return value

    def __repr__(self) -> str:
        return "SecretScrubber(<hidden>)"
