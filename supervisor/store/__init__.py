"""The store: SQLite in the state directory (``supervisor.db``, WAL, mode 0600), the
embedded default, or with the config's ``store.url`` a PostgreSQL database (``postgres``).

It holds the audit rows, OAuth tokens, remembered approvals, tool-definition pins and
the last-known tool lists (so a search can answer before a lazy server has started) and
the protocol era each server speaks (so a start goes straight to it);
writes survive a kill of the process without corruption.

- ``records``: ``AuditRow``, ``hash_arguments`` (the audit keeps arguments only as a hash)
  and ``audit_hash`` (the same digest, faster where orjson writes the same bytes).
- ``schema``: the ordered migration steps, one list for both backends (the dialects'
  words filled in per backend), and the ``schema_version`` table.
- ``database``: ``Store``, the synchronous wrapper of either (WAL, mode 0600 for SQLite).
- ``postgres``: ``open_postgres``, a ``Store`` on one psycopg 3 connection (the only
  module that imports psycopg, on first use).
- ``actor``: ``StoreActor``, its async owner: non-blocking submits of ``messages``,
  batched writes in a worker thread, writes survive shutdown; ``unsaved``: what it says
  of the writes the database refused that no journal holds.
- ``journal``: ``AuditJournal``, each audit row appended to this instance's journal file
  before its call is answered (durable against a kill of the process, not a power loss);
  ``journal_files``: where the journals are.
- ``folder``: the folder, a process that inserts one instance's journal into the store;
  ``folding``: its parent side (spawned, woken, restarted, flushed).
- ``replay``: folding journals into SQLite, idempotently: closed segments, an instance's
  journal at its end, and at start the journals of dead instances.
"""

from supervisor.store.actor import StoreActor, StoreStatistics
from supervisor.store.database import DB_FILENAME, Store
from supervisor.store.errors import StoreError, StoreForeignError, StoreVersionError
from supervisor.store.messages import (
    AddAudit,
    ForgetApproval,
    RememberApproval,
    SaveEra,
    SaveToolList,
    SetPin,
    StoreMessage,
)
from supervisor.store.records import AuditRow, audit_hash, hash_arguments
from supervisor.store.schema import SCHEMA_VERSION

__all__ = [
    "DB_FILENAME",
    "SCHEMA_VERSION",
    "AddAudit",
    "AuditRow",
    "ForgetApproval",
    "RememberApproval",
    "SaveEra",
    "SaveToolList",
    "SetPin",
    "Store",
    "StoreActor",
    "StoreError",
    "StoreForeignError",
    "StoreMessage",
    "StoreStatistics",
    "StoreVersionError",
    "audit_hash",
    "hash_arguments",
]
