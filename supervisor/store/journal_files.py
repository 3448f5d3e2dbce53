"""Where the audit journals are, and one instance's segments: what the journal, the
folder and the replay share (no Trio here: the folder process imports it)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

JOURNAL_DIR = "journal"
SUFFIX = ".jsonl"
RETRY_S = 1.0
"""After a failed write (the journal) or a refused insert (the folder), try again this often."""


def journal_dir(state_dir: Path) -> Path:
    """Where every instance's journal lives."""
    return Path(state_dir) / JOURNAL_DIR


def instance_segments(directory: Path, instance_id: str) -> list[tuple[int, Path]]:
    """One instance's segments in the journal ``directory``, oldest first, with their numbers."""
    prefix = f"{instance_id}."
    found = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(directory):
            index = name[len(prefix) : -len(SUFFIX)]
            if name.startswith(prefix) and name.endswith(SUFFIX) and index.isdigit():
                found.append((int(index), directory / name))
    return sorted(found)
