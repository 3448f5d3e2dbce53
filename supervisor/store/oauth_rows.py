"""The store's ``oauth`` table: remote servers' OAuth records, sealed at rest.

A record holds tokens, a refresh token, a client secret and a DPoP private key. Once
``seal_with`` is given the configured keys (the service and every command that opens
the state directory do so), each record is written sealed (``sealing.py``) and
plaintext records from before are sealed in place. A record no configured key opens
(a lost key) is dropped with one warning naming the server: its server needs a login
again, as one never signed in.

Rows are keyed by server, URL and person: a shared server's record has person "", a
``per_user`` server's each person's own (store migration 10).

Beside each record, a refresh lease (``oauth_leases``, store migration 11): processes
sharing the store take it before they refresh the record's token, so one of them asks
the authorization server and the others read its result (``vault.py``). It is taken
in one statement, by the database's clock; a holder that dies leaves a lease that
expires.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from actors.log_events import get_logger
from supervisor.store.records import canonical_json
from supervisor.store.sealing import PREFIX, Sealer, Unopenable, bound_to
from supervisor.store.store_rows import StoreRows

log = get_logger("supervisor.store.secrets")


@attrs.frozen
class Resealed:
    """What ``reseal_oauth`` did: records (re)sealed with the first key, and dropped."""

    sealed: int = 0
    dropped: int = 0


class OAuthRows(StoreRows):
    """The ``oauth`` table's methods of ``Store`` (``database.py``)."""

    sealer: Sealer | None

    def save_oauth(
        self, server: str, url: str, record: Mapping[str, Any] | None, at: float, *, person: str = ""
    ) -> None:
        """Replace (or with None delete) a remote server's OAuth record (``person``: whose,
        "" for a shared server's), sealed when a sealer is set."""
        with self.transaction():
            if record is None:
                self._connection.execute(
                    "DELETE FROM oauth WHERE server = ? AND url = ? AND person = ?", (server, url, person)
                )
                return
            text = canonical_json(dict(record))
            if self.sealer is not None:
                text = self.sealer.seal(text, bound_to(server, url, person))
            self._connection.execute(
                "INSERT INTO oauth (server, url, person, record, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (server, url, person) DO UPDATE SET record = excluded.record,"
                " updated_at = excluded.updated_at",
                (server, url, person, text, at),
            )

    def take_oauth_lease(
        self, server: str, url: str, holder: str, lease_s: float, *, person: str = ""
    ) -> tuple[bool, str | None]:
        """Take the refresh lease of a record for ``lease_s`` seconds, if nobody holds
        it or its holder's time ran out. Returns whether ``holder`` has it now, and the
        holder it was taken over from (an expired lease), if any."""
        now = self.dialect.words["now"]
        key = (server, url, person)
        where = "server = ? AND url = ? AND person = ?"
        with self.transaction():
            before = self._connection.execute(
                f"SELECT holder FROM oauth_leases WHERE {where} AND expires_at < {now}", key
            ).fetchall()
            taken = self._connection.execute(
                "INSERT INTO oauth_leases (server, url, person, holder, expires_at)"
                f" VALUES (?, ?, ?, ?, {now} + ?) ON CONFLICT (server, url, person) DO UPDATE"
                " SET holder = excluded.holder, expires_at = excluded.expires_at"
                f" WHERE oauth_leases.expires_at < {now}",
                (*key, holder, float(lease_s)),
            )
            won = taken.rowcount == 1
        return won, (str(before[0][0]) if won and before else None)

    def release_oauth_lease(self, server: str, url: str, holder: str, *, person: str = "") -> None:
        """Give the lease back (only ``holder``'s: one taken over meanwhile stays)."""
        with self.transaction():
            self._connection.execute(
                "DELETE FROM oauth_leases WHERE server = ? AND url = ? AND person = ? AND holder = ?",
                (server, url, person, holder),
            )

    def oauth_record(self, server: str, url: str, *, person: str = "") -> dict[str, Any] | None:
        """The stored OAuth record of a server at a URL (``person``'s own, or with ""
        the shared one), or None (also when no configured key opens it: then it is
        dropped, see ``_opened``)."""
        rows = self._read(
            "SELECT record FROM oauth WHERE server = ? AND url = ? AND person = ?", (server, url, person)
        )
        if not rows:
            return None
        text = self._opened(server, url, person, rows[0][0])
        try:
            data = json.loads(text) if text is not None else None
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def seal_with(self, sealer: Sealer) -> Resealed:
        """Seal records from now on, and the plaintext ones from before now (with
        ``secure_delete``, so no old plaintext copy stays in a free page)."""
        self.sealer = sealer
        self._connection.execute("PRAGMA secure_delete=ON")
        return self.reseal_oauth(rotate=False)

    def reseal_oauth(self, *, rotate: bool = True) -> Resealed:
        """Seal plaintext records; with ``rotate`` also those sealed with an older key,
        so the old key can then leave the config. Unopenable records are dropped."""
        sealer = self.sealer
        if sealer is None:
            raise ValueError("reseal_oauth needs a sealer (seal_with)")
        sealed = dropped = 0
        for server, url, person, stored in self._read("SELECT server, url, person, record FROM oauth"):
            if sealer.is_current(stored) or (not rotate and stored.startswith(PREFIX)):
                continue
            text = self._opened(server, url, person, stored)
            if text is None:
                dropped += 1
                continue
            with self.transaction():  # ``AND record = ?``: a row changed meanwhile stays
                self._connection.execute(
                    "UPDATE oauth SET record = ? WHERE server = ? AND url = ? AND person = ? AND record = ?",
                    (sealer.seal(text, bound_to(server, url, person)), server, url, person, stored),
                )
                sealed += 1
        return Resealed(sealed, dropped)

    def _opened(self, server: str, url: str, person: str, stored: str) -> str | None:
        """The record's plaintext; None, having dropped the row, when no configured key
        opens it (the row is deleted only if it is still the one read)."""
        if not stored.startswith(PREFIX):
            return stored  # plaintext from before sealing
        if self.sealer is None:
            return None  # a store opened without its keys cannot tell a lost key: keep it
        try:
            return self.sealer.open(stored, bound_to(server, url, person))
        except Unopenable as exc:
            reason = str(exc)
        with self.transaction():
            self._connection.execute(
                "DELETE FROM oauth WHERE server = ? AND url = ? AND person = ? AND record = ?",
                (server, url, person, stored),
            )
        log.warning(
            "oauth record dropped: no configured key opens it; the server needs a login again",
            extra={"fields": {"server": server, "reason": reason} | ({"person": person} if person else {})},
        )
        return None
