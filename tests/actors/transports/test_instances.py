"""Instance locks: a live instance is never taken for dead, a dead one is claimed once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from actors.transports.instances import (
    InstanceLock,
    claim_dead_instances,
    instance_is_live,
    instances_dir,
    is_instance_id,
)
from tests.support.paths import REPO

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")


def test_a_held_lock_is_live_and_a_released_one_is_gone(tmp_path: Path) -> None:
    lock = InstanceLock.acquire(tmp_path, "serve")
    assert is_instance_id(lock.id) and ":" not in lock.id
    assert instance_is_live(tmp_path, lock.id)
    lock.release()
    assert not instance_is_live(tmp_path, lock.id)
    assert list(instances_dir(tmp_path).iterdir()) == []  # a clean end leaves nothing
    lock.release()  # idempotent


def test_two_instances_in_one_process_do_not_see_each_other_as_dead(tmp_path: Path) -> None:
    with InstanceLock.acquire(tmp_path, "embedded") as a, InstanceLock.acquire(tmp_path, "embedded") as b:
        assert a.id != b.id
        assert instance_is_live(tmp_path, a.id) and instance_is_live(tmp_path, b.id)
        with claim_dead_instances(tmp_path) as dead:
            assert dead == []


def test_a_killed_instance_is_dead_and_claimed_exactly_once(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from pathlib import Path
                from actors.transports.instances import InstanceLock
                lock = InstanceLock.acquire(Path({str(tmp_path)!r}), "serve")
                print(lock.id, flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert child.stdout is not None
        instance_id = child.stdout.readline().strip()
        assert instance_is_live(tmp_path, instance_id)
        with claim_dead_instances(tmp_path) as dead:
            assert dead == []  # alive: never claimed
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert not instance_is_live(tmp_path, instance_id)
    with claim_dead_instances(tmp_path) as first:
        assert [d.id for d in first] == [instance_id]
        # While one claimer holds it, the dead instance looks live to everyone else.
        assert instance_is_live(tmp_path, instance_id)
        with claim_dead_instances(tmp_path) as second:
            assert second == []
        first[0].done()
    assert not instance_is_live(tmp_path, instance_id)
    with claim_dead_instances(tmp_path) as third:
        assert third == []


def test_a_claim_given_up_leaves_the_instance_for_a_later_claimer(tmp_path: Path) -> None:
    lock = InstanceLock.acquire(tmp_path, "stdio")
    os.close(lock._fd)  # the holder dies without cleaning up
    lock._fd = -1
    with claim_dead_instances(tmp_path) as dead:
        assert [d.id for d in dead] == [lock.id]  # not done(): recovery failed
    with claim_dead_instances(tmp_path) as again:
        assert [d.id for d in again] == [lock.id]
        again[0].done()
    assert list(instances_dir(tmp_path).iterdir()) == []


def test_foreign_files_and_bad_ids_are_ignored(tmp_path: Path) -> None:
    directory = instances_dir(tmp_path)
    directory.mkdir(parents=True)
    (directory / "notes.lock").write_text("x")
    assert not instance_is_live(tmp_path, "../../etc/passwd")
    assert not instance_is_live(tmp_path, "1-zzzzzzzzzzzz")
    with claim_dead_instances(tmp_path) as dead:
        assert dead == []
    assert (directory / "notes.lock").exists()


def test_a_partial_file_of_an_instance_that_died_starting_is_removed(tmp_path: Path) -> None:
    directory = instances_dir(tmp_path)
    directory.mkdir(parents=True)
    partial = directory / "123-0123456789ab.partial"
    partial.write_text("")
    with claim_dead_instances(tmp_path) as dead:
        assert dead == []
    assert not partial.exists()
