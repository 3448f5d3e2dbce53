"""OAuth records sealed at rest (``supervisor/store/oauth_rows.py``, ``sealing.py``):
plaintext from before is sealed on open, a rotation's old key still opens, a lost key
drops the record with one line, and a ciphertext moved to another row does not open."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from supervisor.store import Store
from supervisor.store.sealing import PREFIX, Sealer, key_id

URL = "https://docs.example/mcp"
RECORD = {
    "tokens": {"access_token": "at-planted-7c1e", "refresh_token": "rt-planted-9d2f"},
    "client": {"client_id": "c", "client_secret": "cs-planted-3a8b"},
    "dpop_key": {"kty": "EC", "d": "dpop-private-planted-5e4a"},
}
PLANTED = (b"at-planted-7c1e", b"rt-planted-9d2f", b"cs-planted-3a8b", b"dpop-private-planted-5e4a")
OLD, NEW = os.urandom(32), os.urandom(32)


def raw_rows(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT server, url, record FROM oauth ORDER BY server").fetchall()


def raw_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def sealed(db: Path, keys: tuple[bytes, ...]) -> Store:
    store = Store.open(db)
    store.seal_with(Sealer(keys))
    return store


def sealed_by(reopen: Callable[[], Store], keys: tuple[bytes, ...]) -> Store:
    """``sealed`` on either backend (``reopen``, conftest.py)."""
    store = reopen()
    store.seal_with(Sealer(keys))
    return store


def test_plaintext_records_from_before_are_sealed_on_open_and_gone_from_the_file(tmp_path: Path) -> None:
    db = tmp_path / "supervisor.db"
    with Store.open(db) as store:  # an older version: no sealer
        store.save_oauth("docs", URL, RECORD, 1.0)
        store.save_oauth("wiki", URL, {"tokens": {"access_token": "other"}}, 1.0)
    assert all(planted in raw_bytes(db) for planted in PLANTED)
    with sealed(db, (NEW,)) as store:
        assert store.oauth_record("docs", URL) == RECORD
    rows = raw_rows(db)
    assert [server for server, _, _ in rows] == ["docs", "wiki"]
    assert all(record.startswith(f"{PREFIX}{key_id(NEW)}:") for _, _, record in rows)
    data = raw_bytes(db)
    for planted in PLANTED:
        assert planted not in data  # secure_delete: no old copy left in a free page either


def test_a_rotation_old_key_second_opens_then_the_command_reseals_with_the_first(tmp_path: Path) -> None:
    db = tmp_path / "supervisor.db"
    with sealed(db, (OLD,)) as store:
        store.save_oauth("docs", URL, RECORD, 1.0)
    with sealed(db, (NEW, OLD)) as store:
        assert store.oauth_record("docs", URL) == RECORD  # still under the old key
        assert raw_rows(db)[0][2].startswith(f"{PREFIX}{key_id(OLD)}:")
        done = store.reseal_oauth()
        assert (done.sealed, done.dropped) == (1, 0)
        assert store.reseal_oauth().sealed == 0  # nothing left to do
    assert raw_rows(db)[0][2].startswith(f"{PREFIX}{key_id(NEW)}:")
    with sealed(db, (NEW,)) as store:  # the old key dropped from the config
        assert store.oauth_record("docs", URL) == RECORD


def test_a_lost_key_drops_its_records_with_one_line_naming_the_server(
    reopen: Callable[[], Store], caplog: pytest.LogCaptureFixture
) -> None:
    with sealed_by(reopen, (OLD,)) as store:
        store.save_oauth("docs", URL, RECORD, 1.0)
    caplog.set_level(logging.WARNING, logger="supervisor.store.secrets")
    with sealed_by(reopen, (NEW,)) as store:
        assert store.oauth_record("docs", URL) is None
        store.save_oauth("docs", URL, RECORD, 2.0)  # the person signs in again
        assert store.oauth_record("docs", URL) == RECORD
    (line,) = [r for r in caplog.records if r.name == "supervisor.store.secrets"]
    assert line.levelno == logging.WARNING and "needs a login again" in line.getMessage()
    fields: dict[str, Any] = getattr(line, "fields", {})
    assert fields["server"] == "docs" and key_id(OLD) in fields["reason"]
    assert not any(planted.decode() in line.getMessage() + str(fields) for planted in PLANTED)


def test_a_store_opened_without_keys_keeps_sealed_records_it_cannot_read(
    reopen: Callable[[], Store],
) -> None:
    with sealed_by(reopen, (OLD,)) as store:
        store.save_oauth("docs", URL, RECORD, 1.0)
    with reopen() as store:
        assert store.oauth_record("docs", URL) is None
    with sealed_by(reopen, (OLD,)) as store:
        assert store.oauth_record("docs", URL) == RECORD


def test_a_ciphertext_moved_to_another_row_does_not_open(tmp_path: Path) -> None:
    db = tmp_path / "supervisor.db"
    with sealed(db, (OLD,)) as store:
        store.save_oauth("docs", URL, RECORD, 1.0)
        store.save_oauth("wiki", URL, {"tokens": {"access_token": "wiki-token"}}, 1.0)
    ciphertext = raw_rows(db)[0][2]
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE oauth SET record = ? WHERE server = 'wiki'", (ciphertext,))
    with sealed(db, (OLD,)) as store:
        assert store.oauth_record("docs", URL) == RECORD
        assert store.oauth_record("wiki", URL) is None  # dropped: docs' tokens never serve wiki
    assert [server for server, _, _ in raw_rows(db)] == ["docs"]
