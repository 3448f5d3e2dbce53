"""The ``tracing`` section of a config file (``TracingSettings``): what a traced call's
span may carry besides its metadata (arguments, results, the tenant), each opted in."""

from __future__ import annotations

from .model import TracingSettings
from .values import check_keys, child, expect_bool, expect_object

_KEYS = ("arguments", "results", "identity")


def read_tracing(value: object, path: str) -> TracingSettings:
    """The tracing settings at ``path``: each key true or false, default false."""
    obj = expect_object(value, path)
    check_keys(obj, path, _KEYS)
    return TracingSettings(**{key: expect_bool(obj.get(key, False), child(path, key)) for key in _KEYS})
