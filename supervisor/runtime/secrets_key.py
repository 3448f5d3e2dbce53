"""The keys that seal the store's OAuth records: the config's, else the state directory's own.

With no ``secrets_at_rest`` keys configured, a key is generated on first start into
``secrets.key`` in the state directory (mode 0600), so tokens are never stored in
clear by default. An operator who wants the key elsewhere (a KMS-mounted file, an
environment variable) names it in the config instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from supervisor.settings.model import Config
from supervisor.settings.secrets_at_rest import decode_key, new_key

KEY_FILENAME = "secrets.key"


class KeyFileError(Exception):
    """The state directory's key cannot be read or made (``state_dir.py`` says what to do)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


LOST = (
    "restore it from a backup, or move it away: a new key is made, the OAuth records "
    "sealed with the old one are dropped, and their servers need a login again"
)


def store_keys(config: Config, state_path: Path) -> tuple[bytes, ...]:
    """The configured keys, else the state directory's key (made when missing)."""
    if config.secrets_at_rest.keys:
        return config.secrets_at_rest.keys
    path = state_path / KEY_FILENAME
    try:
        if not path.exists():
            _create(path)
        text = path.read_text()
    except OSError as exc:
        raise KeyFileError(path, f"cannot read or create the key ({exc.strerror})") from None
    try:
        return (decode_key(text),)
    except ValueError as exc:
        raise KeyFileError(path, f"not a key: {exc}") from None


def _create(path: Path) -> None:
    """Write a new key whole, then link it into place: a process starting at the same
    moment reads one key or the other's, never half of one."""
    draft = path.with_name(f".{KEY_FILENAME}.{os.getpid()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (new_key() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(draft, path)
    except FileExistsError:
        pass  # another process made it first: use theirs
    finally:
        os.unlink(draft)
