"""A Python child process of the tests that is to be killed with SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

from tests.support.paths import REPO

ROOT = REPO


@contextlib.contextmanager
def child_to_kill(code: str, *args: object, timeout_s: float = 120) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``python -c code args…`` (the project importable, stdout and stderr piped)
    for the block, which must SIGKILL it; afterwards it is reaped, its pipes closed,
    and it must have died of that SIGKILL. A child still alive after ``timeout_s`` is
    killed, so a test reading its output never hangs (its reads then see the end)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    child = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    watchdog = threading.Timer(timeout_s, child.kill)
    watchdog.start()
    try:
        yield child
    finally:
        watchdog.cancel()
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        child.wait(timeout=10)
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
