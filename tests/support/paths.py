"""Where things are, for tests at any depth under ``tests/``."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SERVERS = TESTS / "servers"
GOLDEN = TESTS / "golden"
