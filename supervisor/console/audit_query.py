"""The audit page's search form, turned into a ``GET /v1/audit`` query.

The form's fields are the API's filters by name. Its times are what a browser's
``datetime-local`` input sends (``2026-11-28T15:47``, read as UTC, as the page shows
every time) or unix seconds; the API wants unix seconds. Everything else passes through
as typed, so the API alone decides what a filter may be: a tenant naming another
tenant is the API's 400, which the page shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlencode

TIMES = ("since", "until")
FILTERS = ("tenant", "person", "server", "tool", "outcome")
PAGING = ("cursor", "limit")
FIELDS = (*TIMES, *FILTERS, *PAGING)


class BadSearch(ValueError):
    """A form value the console cannot turn into the API's query; ``str()`` says which
    and how to write it."""


def form_of(query_string: bytes) -> dict[str, str]:
    """The search's non-empty fields from the page's query string (the last value of a
    repeated one; unknown fields dropped)."""
    found = parse_qs(query_string.decode("latin-1"), keep_blank_values=False)
    return {name: found[name][-1].strip() for name in FIELDS if name in found and found[name][-1].strip()}


def api_query(form: Mapping[str, str]) -> str:
    """The query string of ``GET /v1/audit`` for ``form``; BadSearch for a time that is
    neither a date and time nor unix seconds."""
    query = {name: value for name, value in form.items() if name in FIELDS}
    for name in TIMES:
        if name in query:
            query[name] = repr(unix_seconds(name, query[name]))
    return urlencode(query)


def unix_seconds(name: str, text: str) -> float:
    """``text`` (``YYYY-MM-DDTHH:MM[:SS]`` in UTC unless it names its offset, or unix
    seconds) as unix seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadSearch(
            f"{name}={text!r} is not a time: give a date and time like 2026-11-28T15:47 (UTC), "
            "or unix seconds"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def older_link(form: Mapping[str, str], cursor: str) -> str:
    """The page's own address for the next (older) page: the same search, the API's cursor."""
    kept = {name: value for name, value in form.items() if name != "cursor"}
    return "/ui/audit?" + urlencode({**kept, "cursor": cursor})
