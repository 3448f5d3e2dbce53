"""The ``tracing`` and ``audit`` sections of a config file: what a traced call's span
may carry besides its metadata (arguments, results, who called), each opted in, and
how long the audit keeps its rows (both say what the supervisor keeps of a call)."""

from __future__ import annotations

from .model import AuditSettings, TracingSettings
from .values import check_keys, child, expect_bool, expect_number, expect_object

_KEYS = ("arguments", "results", "identity")


def read_tracing(value: object, path: str) -> TracingSettings:
    """The tracing settings at ``path``: each key true or false, default false."""
    obj = expect_object(value, path)
    check_keys(obj, path, _KEYS)
    return TracingSettings(**{key: expect_bool(obj.get(key, False), child(path, key)) for key in _KEYS})


def read_audit(value: object, path: str) -> AuditSettings:
    """The audit settings at ``path``: ``keep_days``, a number of days > 0, or absent
    or null (keep every row)."""
    obj = expect_object(value, path)
    check_keys(obj, path, ("keep_days",))
    if obj.get("keep_days") is None:
        return AuditSettings()
    return AuditSettings(keep_days=expect_number(obj["keep_days"], child(path, "keep_days"), positive=True))
