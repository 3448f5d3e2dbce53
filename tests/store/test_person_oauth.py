"""OAuth records per person (store migration 10, ``oauth_rows.py``, ``vault.py``): a
``per_user`` server keeps each person's own record beside the shared one, each sealed
and bound to its person, and the records from before migration 10 stay valid."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import pytest

from supervisor.store import Store
from supervisor.store.schema import MIGRATIONS, migrate
from supervisor.store.sealing import Sealer, bound_to
from supervisor.store.vault import StoreVault

URL = "https://docs.example/mcp"
KEY = os.urandom(32)
ALICE = {"tokens": {"access_token": "at-alice-planted-41c2", "refresh_token": "rt-alice-planted-7b90"}}
BOB = {"tokens": {"access_token": "at-bob-planted-0d3e", "refresh_token": "rt-bob-planted-5a17"}}


def sealed(db: Path) -> Store:
    store = Store.open(db)
    store.seal_with(Sealer((KEY,)))
    return store


def rows(db: Path) -> list[tuple[str, str, str]]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return connection.execute("SELECT server, person, record FROM oauth ORDER BY person").fetchall()


def raw_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_each_person_has_a_sealed_row_of_their_own_beside_the_shared_one(tmp_path: Path) -> None:
    db = tmp_path / "supervisor.db"
    with sealed(db) as store:
        store.save_oauth("docs", URL, {"tokens": {"access_token": "shared"}}, 1.0)
        store.save_oauth("docs", URL, ALICE, 1.0, person="alice")
        store.save_oauth("docs", URL, BOB, 1.0, person="bob")
        assert store.oauth_record("docs", URL, person="alice") == ALICE
        assert store.oauth_record("docs", URL, person="bob") == BOB
        assert store.oauth_record("docs", URL, person="carol") is None  # never signed in
        store.save_oauth("docs", URL, None, 2.0, person="bob")  # bob's forgotten, nobody else's
        assert store.oauth_record("docs", URL, person="bob") is None
        assert store.oauth_record("docs", URL, person="alice") == ALICE
        assert store.oauth_record("docs", URL) == {"tokens": {"access_token": "shared"}}
    assert [(server, person) for server, person, _ in rows(db)] == [("docs", ""), ("docs", "alice")]
    data = raw_bytes(db)
    for token in (b"at-alice-planted-41c2", b"rt-alice-planted-7b90", b"at-bob-planted-0d3e"):
        assert token not in data  # sealed, and bob's deleted row left no copy behind


def test_a_record_copied_to_another_persons_row_does_not_open(tmp_path: Path) -> None:
    db = tmp_path / "supervisor.db"
    with sealed(db) as store:
        store.save_oauth("docs", URL, ALICE, 1.0, person="alice")
        store.save_oauth("docs", URL, BOB, 1.0, person="bob")
        store.save_oauth("docs", URL, {"tokens": {"access_token": "shared"}}, 1.0)
    alices = dict((person, record) for _, person, record in rows(db))["alice"]
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("UPDATE oauth SET record = ? WHERE person IN ('bob', '')", (alices,))
    with sealed(db) as store:
        assert store.oauth_record("docs", URL, person="alice") == ALICE
        assert store.oauth_record("docs", URL, person="bob") is None  # alice's tokens never serve bob
        assert store.oauth_record("docs", URL) is None  # nor the shared server
    assert [person for _, person, _ in rows(db)] == ["alice"]


def test_records_from_before_migration_10_stay_valid_as_the_shared_ones(tmp_path: Path) -> None:
    db = tmp_path / "supervisor.db"
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
        assert migrate(connection, db, MIGRATIONS[:9]) == 9
        old_sealed = Sealer((KEY,)).seal('{"tokens":{"access_token":"was-sealed"}}', bound_to("docs", URL))
        connection.execute("INSERT INTO oauth VALUES ('docs', ?, ?, 1.0)", (URL, old_sealed))
        connection.execute("INSERT INTO oauth VALUES ('wiki', ?, ?, 1.0)", (URL, '{"was": "plaintext"}'))
    with sealed(db) as store:
        assert store.oauth_record("docs", URL) == {"tokens": {"access_token": "was-sealed"}}
        assert store.oauth_record("wiki", URL) == {"was": "plaintext"}  # and sealed now
        assert store.oauth_record("docs", URL, person="alice") is None
    assert [(server, person) for server, person, _ in rows(db)] == [("docs", ""), ("wiki", "")]
    assert b"plaintext" not in raw_bytes(db)


def test_a_rotation_reseals_every_persons_record_in_its_own_row(tmp_path: Path) -> None:
    db, new = tmp_path / "supervisor.db", os.urandom(32)
    with sealed(db) as store:
        store.save_oauth("docs", URL, ALICE, 1.0, person="alice")
        store.save_oauth("docs", URL, BOB, 1.0, person="bob")
    with Store.open(db) as store:
        store.seal_with(Sealer((new, KEY)))
        assert store.reseal_oauth().sealed == 2
    with Store.open(db) as store:
        store.seal_with(Sealer((new,)))  # the old key gone: both still open, each as its person's
        assert store.oauth_record("docs", URL, person="alice") == ALICE
        assert store.oauth_record("docs", URL, person="bob") == BOB


async def test_a_persons_vault_loads_and_saves_only_that_persons_record(tmp_path: Path) -> None:
    with sealed(tmp_path / "supervisor.db") as store:
        shared = StoreVault(store)
        alice, bob = shared.for_person("alice"), shared.for_person("bob")
        await alice.save("docs", URL, ALICE)
        await shared.save("docs", URL, {"tokens": {"access_token": "shared"}})
        assert await alice.load("docs", URL) == ALICE
        assert await bob.load("docs", URL) is None
        assert await shared.load("docs", URL) == {"tokens": {"access_token": "shared"}}
        await alice.save("docs", URL, None)
        assert await alice.load("docs", URL) is None
        assert await shared.load("docs", URL) is not None
        with pytest.raises(ValueError, match="a person's vault needs the person"):
            shared.for_person("")
