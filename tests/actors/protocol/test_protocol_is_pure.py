"""The sans-I/O core stays sans-I/O: no event loop imported, no I/O module in its source.

Two checks, because each misses what the other sees. The import probe runs a fresh
interpreter (this one has Trio loaded by pytest-trio) and catches Trio arriving
through any dependency. The static check reads our own source and catches an I/O
import that some other module happens not to pull in at import time.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.support.paths import REPO

ROOT = REPO
PURE_MODULES = (
    "actors.protocol",
    "actors.protocol.errors",
    "actors.protocol.messages",
    "actors.protocol.http_framing",
    "actors.protocol.jsonrpc",
    "actors.protocol.bridge_envelope",
    "actors.protocol.json_depth",
    "actors.protocol.ndjson",
    "actors.protocol.payloads",
    "actors.protocol.session",
    "actors.protocol.server_session",
    "actors.protocol.sse",
    "actors.connection.states",
    "actors.connection.schedule",
)
PURE_FILES = (
    *sorted((ROOT / "actors" / "protocol").glob("*.py")),
    ROOT / "actors" / "connection" / "states.py",
    ROOT / "actors" / "connection" / "schedule.py",
)
EVENT_LOOPS = ("trio", "anyio")
FORBIDDEN_IMPORTS = frozenset({"trio", "anyio", "asyncio", "socket", "subprocess", "os"})

_PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(*names: str) -> set[str]:
    """Every module a fresh interpreter holds after importing ``names``."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *names],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout))


def forbidden_imports(source: str) -> list[str]:
    """Top-level package names of forbidden imports in ``source``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.extend(name for name in names if name.split(".")[0] in FORBIDDEN_IMPORTS)
    return found


def test_core_imports_no_event_loop() -> None:
    modules = loaded_modules(*PURE_MODULES)
    assert set(PURE_MODULES) <= modules  # the probe really imported them
    for loop in EVENT_LOOPS:
        offenders = sorted(m for m in modules if m == loop or m.startswith(loop + "."))
        assert not offenders, f"importing the protocol core loaded {offenders}"


def test_probe_would_notice_trio() -> None:
    assert "trio" in loaded_modules("trio")


def test_core_source_imports_no_io() -> None:
    assert ROOT / "actors" / "protocol" / "session.py" in PURE_FILES
    assert ROOT / "actors" / "protocol" / "ndjson.py" in PURE_FILES
    for path in PURE_FILES:
        bad = forbidden_imports(path.read_text(encoding="utf-8"))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_static_check_sees_every_import_form() -> None:
    source = "import os.path\nfrom trio import sleep\nimport json, socket as s\nfrom . import codec\n"
    assert forbidden_imports(source) == ["os.path", "trio", "socket"]
    # Imports inside functions count too.
    assert forbidden_imports("def f():\n    import subprocess\n") == ["subprocess"]
