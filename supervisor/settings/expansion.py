"""``${env:NAME}`` and ``${file:PATH}`` expansion in config strings.

Expansion happens at load time so a missing credential stops the start with a message
naming it, instead of surfacing later as an opaque 401. Whatever an expansion produces
is treated as a secret: the expander records it so the server's ``secrets`` can redact
it from logs, errors and stderr buffers. ``$${`` writes a literal ``${``.

``${file:…}`` reads a regular file of at most 1 MiB, after following symlinks (secrets
mounted by Kubernetes are symlinks). Devices, pipes and directories are config errors:
``/dev/zero`` never ends and a FIFO blocks whoever opens it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from .values import Invalid, check_os_string, child, show

MAX_FILE_BYTES = 1024 * 1024
"""The most a ``${file:…}`` reference reads; anything larger is a config error."""

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

    def os_text(self, value: object, path: str, what: str = "a string") -> str:
        """``text`` for what is handed to the OS: argv, environment values, paths."""
        text = self.text(value, path, what)
        check_os_string(text, path, expanded=text != value)
        return text

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
            return MappingProxyType({key: self.deep(item, child(path, key)) for key, item in value.items()})
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
                f"unsupported reference {reference}; only ${{env:NAME}} and ${{file:PATH}} are expanded",
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

    def read_file(self, name: str, path: str) -> str:
        """The text of the file ``name`` names (a path in the config, such as a TLS
        certificate), read as ``${file:…}`` reads: the same limits and messages. Not
        recorded as a secret: the caller knows whether it is one."""
        return self._file(name, show(name), path)

    def _file(self, name: str, reference: str, path: str) -> str:
        if not name:
            raise Invalid(path, f"{reference} does not name a file")
        full = os.path.join(self.base_dir, os.path.expanduser(name))
        data = _read_small_file(full, reference, path)
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid(path, f"{reference} is not UTF-8 text ({full})") from None
        # Universal newlines, as text-mode reading gives; token files usually end in a
        # newline that is not part of the token.
        return content.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")


def _read_small_file(full: str, reference: str, path: str) -> bytes:
    """The bytes of a regular file of at most ``MAX_FILE_BYTES``, symlinks followed.

    Devices, FIFOs, sockets and directories are refused before they are opened (a FIFO
    would block the open, ``/dev/zero`` never ends); the opened file is checked again
    (it may have been swapped in between), opened non-blocking, and never read past
    the cap, even if it grows meanwhile.
    """

    def cannot(reason: str) -> Invalid:
        return Invalid(
            path, f"{reference} cannot be read ({reason}: {full}); create it or remove the reference"
        )

    try:
        kind = _kind(os.stat(full).st_mode)
        if kind is not None:
            raise _not_regular(full, kind, reference, path)
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise cannot(getattr(exc, "strerror", None) or str(exc)) from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise _not_regular(full, kind, reference, path)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise cannot(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if size > MAX_FILE_BYTES:
        raise Invalid(
            path,
            f"{reference} is larger than {MAX_FILE_BYTES // 1024 // 1024} MiB ({full}); "
            "${file:…} is for secrets and short values, point it at a smaller file",
        )
    return b"".join(chunks)


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    """What a non-regular file is (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _not_regular(full: str, kind: str, reference: str, path: str) -> Invalid:
    real = os.path.realpath(full)
    where = full if real == full else f"{full} -> {real}"
    return Invalid(path, f"{reference} is {kind}, not a regular file ({where}); point it at a file")
