"""The repository stands alone: nothing in it cites a document outside it.

Readers get what they need where they need it (a docstring, ``docs/``, the README);
a pointer to a design note that is not in the repository helps nobody. Section signs
are for public standards only (``RFC 9112 §3.2.2``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.support.paths import REPO

ROOT = REPO
PLACES = ("supervisor", "actors", "tests", "benchmarks", "docs", "config", ".ci")
FILES = ("README.md", "pyproject.toml")
SUFFIXES = {".py", ".md", ".json", ".toml", ".txt", ""}
# Documents that live (or lived) outside the repository, and the directory that holds
# them. Their names are put together here, so this file does not cite them itself.
BRIEF, DEVS, HABITS, BESIDE = "DESIGN", "DEVELOPERS", "STYLE", "/".join(("..", "shared"))
OUTSIDE = re.compile(
    rf"\b{BRIEF}(?:\.md|/|\s*§)|\b{DEVS}\.md|\b{HABITS}\.md|{re.escape(BESIDE)}\b|\bseed guide\b"
)
STANDARD_SECTION = re.compile(r"(?:RFC \d+|HTML) $")


def skipped(folder: str) -> bool:
    """Folders that are not ours to read: caches and what benchmarks install
    (``benchmarks/.peers/``, git-ignored: virtualenvs and ``node_modules``)."""
    return folder.startswith(".") or folder in ("__pycache__", "node_modules")


def texts() -> list[Path]:
    paths = [ROOT / name for name in FILES]
    for place in PLACES:
        for folder, dirs, names in os.walk(ROOT / place):
            dirs[:] = [d for d in dirs if not skipped(d)]
            paths.extend(Path(folder, n) for n in names if Path(n).suffix in SUFFIXES)
    return [p for p in paths if p != Path(__file__).resolve()]  # its examples are citations


def outside_citations(text: str) -> list[str]:
    found = [m.group(0) for m in OUTSIDE.finditer(text)]
    for m in re.finditer("§", text):
        if not STANDARD_SECTION.search(text[max(0, m.start() - 12) : m.start()]):
            found.append(text[max(0, m.start() - 20) : m.end() + 2])
    return found


def test_nothing_cites_a_document_outside_the_repository() -> None:
    paths = texts()
    assert ROOT / "actors" / "router" / "validation.py" in paths  # the walk reads our code
    assert not any("node_modules" in p.parts or ".peers" in p.parts for p in paths)  # nor installs
    offenders = {}
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if found := outside_citations(text):
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_the_check_sees_what_it_must() -> None:
    cites = (f"({BRIEF}.md §4)", f"({BRIEF} §6)", f"see {BRIEF}/{HABITS}", f"{DEVS}.md says", f"{BESIDE}/x")
    for cited in cites:
        assert outside_citations(cited), cited
    assert outside_citations("per §6, the body")
    assert outside_citations("RFC 9112 §3.2.2, RFC 6749 §6 and RFC 9728 §3.1") == []
