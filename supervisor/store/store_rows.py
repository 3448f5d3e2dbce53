"""What a ``Store`` mixin of table methods (``cluster_rows.py``, ``tenant_rows.py``, …)
uses of ``Store``: declared once here, so each mixin type-checks on its own."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from supervisor.store.schema import Dialect


class StoreRows:
    """The part of ``Store`` its table mixins stand on."""

    dialect: Dialect
    _connection: Any  # sqlite3.Connection, or postgres.PgConnection

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError  # Store's

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError  # Store's
