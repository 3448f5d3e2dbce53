"""docs/architecture.md stays true to the code it describes.

Code comments point into it by section title; a renamed section would leave them
pointing nowhere. It lists every module over the size limit with its reason; a module
that grows past the limit unnoticed fails here. Every path it names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO

ROOT = REPO
DOC = ROOT / "docs" / "architecture.md"
SIZE_LIMIT = 450
# A quoted title next to a mention of the document: '"Title" in ``docs/architecture.md``'
# or 'docs/architecture.md ("Title")', across a line break too.
_POINTER = re.compile(
    r'"([^"\n]+)"\s+in\s+`*docs/architecture\.md|docs/architecture\.md`*\s*\(\s*"([^"\n]+)"\s*\)'
)


def _headings() -> set[str]:
    return {line.lstrip("#").strip() for line in DOC.read_text().splitlines() if line.startswith("#")}


def _sources() -> list[Path]:
    return sorted(p for d in ("actors", "supervisor", "benchmarks") for p in (ROOT / d).rglob("*.py"))


def _pointers() -> list[tuple[Path, str]]:
    found = []
    for path in _sources():
        text = re.sub(r"\s+", " ", path.read_text())
        for match in _POINTER.finditer(text):
            found.append((path, match.group(1) or match.group(2)))
    return found


def test_code_points_at_sections_that_exist() -> None:
    pointers = _pointers()
    assert len(pointers) >= 5, "the pattern no longer finds the code's pointers"
    headings = _headings()
    missing = [f"{p.relative_to(ROOT)}: {title!r}" for p, title in pointers if title not in headings]
    assert not missing, f"pointers to sections docs/architecture.md does not have: {missing}"


def test_every_module_over_the_limit_is_named_with_its_reason() -> None:
    doc = DOC.read_text()
    section = doc.split("## Modules over 450 lines", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([\w/]+\.py)`", section))
    big = {
        str(p.relative_to(ROOT))
        for d in ("actors", "supervisor")
        for p in (ROOT / d).rglob("*.py")
        if len(p.read_text().splitlines()) > SIZE_LIMIT
    }
    unexplained = sorted(big - named)
    assert not unexplained, f"over {SIZE_LIMIT} lines, not explained in docs/architecture.md: {unexplained}"


def test_paths_the_document_names_exist() -> None:
    paths = set(re.findall(r"`((?:actors|supervisor|tests|benchmarks|docs)/[\w/.-]+)`", DOC.read_text()))
    assert len(paths) >= 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
