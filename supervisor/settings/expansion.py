"""``${env:NAME}`` and ``${file:PATH}`` expansion in config strings.

Expansion happens at load time so a missing credential stops the start with a message
naming it, instead of surfacing later as an opaque 401. Whatever an expansion produces
is treated as a secret: the expander records it so the server's ``secrets`` can redact
it from logs, errors and stderr buffers. ``$${`` writes a literal ``${``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from .values import Invalid, child, show

# "$${" (escape), "${…}" (a reference) or a "${" that is never closed.
_TOKEN = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")


@attrs.define
class Expander:
    """Expands references in strings and remembers every value it produced.

    ``base_dir`` is the config file's directory: ``${file:…}`` paths are relative to it.
    """

    base_dir: str
    environ: Mapping[str, str]
    secrets: list[str] = attrs.field(factory=list)

    def fresh(self) -> Expander:
        """A copy with an empty secret list (one per server)."""
        return Expander(self.base_dir, self.environ)

    def text(self, value: object, path: str, what: str = "a string") -> str:
        """``value`` as a string, with its references expanded."""
        if not isinstance(value, str):
            raise Invalid(path, f"expected {what}, got {show(value)}")
        return self.expand(value, path)

    def expand(self, raw: str, path: str) -> str:
        """``raw`` with every ``${env:…}`` / ``${file:…}`` replaced."""
        if "${" not in raw:
            return raw
        parts: list[str] = []
        position = 0
        for match in _TOKEN.finditer(raw):
            parts.append(raw[position : match.start()])
            position = match.end()
            token = match.group(0)
            if token == "$${":
                parts.append("${")
            elif token == "${":
                raise Invalid(
                    path,
                    f"unterminated reference in {show(raw)}; close it with '}}' "
                    "or write $${ for a literal ${",
                )
            else:
                parts.append(self._resolve(match.group(1), path))
        parts.append(raw[position:])
        return "".join(parts)

    def deep(self, value: Any, path: str) -> Any:
        """Expand every string inside a JSON value and freeze it (for ``oauth``)."""
        if isinstance(value, str):
            return self.expand(value, path)
        if isinstance(value, list):
            return tuple(self.deep(item, child(path, i)) for i, item in enumerate(value))
        if isinstance(value, dict):
            return MappingProxyType(
                {key: self.deep(item, child(path, key)) for key, item in value.items()}
            )
        return value

    def _resolve(self, body: str, path: str) -> str:
        scheme, sep, argument = body.partition(":")
        reference = "${" + body + "}"
        if not sep:
            raise Invalid(
                path,
                f"unknown reference {reference}; write ${{env:{body}}} for an environment "
                "variable or ${file:PATH} for a file's contents ($${ is a literal ${)",
            )
        if scheme == "env":
            value = self._env(argument, reference, path)
        elif scheme == "file":
            value = self._file(argument, reference, path)
        else:
            raise Invalid(
                path,
                f"unsupported reference {reference}; only ${{env:NAME}} and ${{file:PATH}} "
                "are expanded",
            )
        if value:
            self.secrets.append(value)
        return value

    def _env(self, name: str, reference: str, path: str) -> str:
        if not name or "=" in name:
            raise Invalid(path, f"{reference} does not name an environment variable")
        value = self.environ.get(name)
        if value is None:
            raise Invalid(path, f"{reference} is not set; export it or remove the reference")
        return value

    def _file(self, name: str, reference: str, path: str) -> str:
        if not name:
            raise Invalid(path, f"{reference} does not name a file")
        full = os.path.join(self.base_dir, os.path.expanduser(name))
        try:
            with open(full, encoding="utf-8") as handle:
                content = handle.read()
        except UnicodeDecodeError:
            raise Invalid(path, f"{reference} is not UTF-8 text ({full})") from None
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
            reason = getattr(exc, "strerror", None) or str(exc)
            raise Invalid(
                path,
                f"{reference} cannot be read ({reason}: {full}); "
                "create it or remove the reference",
            ) from None
        # Token files usually end in a newline that is not part of the token.
        return content.rstrip("\r\n")
