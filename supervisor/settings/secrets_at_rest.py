"""The ``secrets_at_rest`` section: the keys that seal the store's OAuth records.

``{"keys": ["${file:secrets.key}", "${env:OLD_KEY}"]}``: each key is 32 random bytes
in base64, best kept out of the file itself (``${file:}``, ``${env:}``). Errors name
the entry, never its value: the value is a key.
"""

from __future__ import annotations

import base64
import binascii
import os

from .expansion import Expander
from .model import SecretsAtRest
from .values import Invalid, check_keys, child, expect_list, expect_object

MAKE_KEY = "python3 -c 'import base64,os;print(base64.b64encode(os.urandom(32)).decode())'"
"""The command the errors and the docs give for a new key."""

KEY_BYTES = 32


def decode_key(text: str) -> bytes:
    """A key from its base64 form; ValueError saying what is wrong (never the key)."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("it is not base64") from None
    if len(key) != KEY_BYTES:
        raise ValueError(f"it is {len(key)} bytes in base64, not {KEY_BYTES}")
    return key


def new_key() -> str:
    """A fresh key in its base64 form (32 random bytes)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def read_secrets_at_rest(value: object, path: str, exp: Expander) -> SecretsAtRest:
    """The keys at ``path``, decoded; none: the state directory's own key is used."""
    obj = expect_object(value, path, 'an object like {"keys": ["${file:secrets.key}"]}')
    check_keys(obj, path, ("keys",))
    if "keys" not in obj:
        return SecretsAtRest()
    empty = "the list is empty; name a key, or remove 'secrets_at_rest' to use a generated one"
    return SecretsAtRest(read_keys(obj["keys"], child(path, "keys"), exp, "secrets.key", empty))


def read_keys(value: object, path: str, exp: Expander, example: str, empty: str) -> tuple[bytes, ...]:
    """A list of keys at ``path``, each decoded (``example``: the file a reference names
    in the errors; ``empty``: what an empty list is told)."""
    entries = expect_list(value, path, f'a list of keys, like ["${{file:{example}}}"]')
    if not entries:
        raise Invalid(path, empty)
    keys = []
    for index, entry in enumerate(entries):
        at = child(path, index)
        text = exp.text(entry, at, f'a key in base64, or a reference like "${{file:{example}}}"')
        try:
            keys.append(decode_key(text))
        except ValueError as exc:
            raise Invalid(
                at, f"not a key: {exc}; a key is 32 random bytes in base64, made with: {MAKE_KEY}"
            ) from None
    return tuple(keys)
