"""The audit search of ``GET /v1/audit``: filtered, newest first, one page at a time.

A page ends with a cursor, the (at, id) of its last row, and the next page starts
strictly after it in the same order. Rows written meanwhile are newer than the cursor,
so paging on never repeats or skips a row (``id`` breaks ties between equal times).
"""

from __future__ import annotations

import attrs

from supervisor.store.records import AUDIT_COLUMNS, AuditRow
from supervisor.store.store_rows import StoreRows

MAX_PAGE = 500


@attrs.frozen(slots=True)
class AuditQuery:
    """What to look for: every field None matches every row; ``since <= at < until``."""

    since: float | None = None
    until: float | None = None
    tenant: str | None = None
    person: str | None = None
    server: str | None = None
    tool: str | None = None
    outcome: str | None = None
    after: tuple[float, int] | None = None
    """The cursor: the (at, id) of the previous page's last row."""
    limit: int = 100


@attrs.frozen(slots=True)
class AuditPage:
    """One page of rows, newest first, and the cursor of the next (None: no more)."""

    rows: tuple[AuditRow, ...]
    cursor: tuple[float, int] | None


_EQUAL = ("tenant", "person", "server", "tool", "outcome")


class AuditSearch(StoreRows):
    """``Store.search_audit`` (a mixin of ``Store``)."""

    def search_audit(self, query: AuditQuery) -> AuditPage:
        """The page of rows ``query`` asks for."""
        if not 1 <= query.limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}, got {query.limit}")
        where: list[str] = []
        params: list[object] = []
        for name in _EQUAL:
            value = getattr(query, name)
            if value is not None:
                where.append(f"{name} = ?")
                params.append(value)
        if query.since is not None:
            where.append("at >= ?")
            params.append(query.since)
        if query.until is not None:
            where.append("at < ?")
            params.append(query.until)
        if query.after is not None:
            at, row_id = query.after
            where.append("(at < ? OR (at = ? AND id < ?))")
            params += [at, at, row_id]
        sql = f"SELECT id, {AUDIT_COLUMNS} FROM audit"
        if where:
            sql += " WHERE " + " AND ".join(where)
        found = self._read(sql + " ORDER BY at DESC, id DESC LIMIT ?", [*params, query.limit + 1])
        page = found[: query.limit]
        rows = tuple(AuditRow(*row[1:]) for row in page)
        cursor = (float(page[-1][1]), int(page[-1][0])) if len(found) > query.limit else None
        return AuditPage(rows, cursor)
