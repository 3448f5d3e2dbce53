"""The layering rule: ``actors/`` never imports ``supervisor/``.

The service is built around the actors, not the other way round: a connection, a
transport or the router must stay usable (and testable) without the service. The
static check reads every module under ``actors/`` and sees every import statement,
wherever it is: at the top, under ``if TYPE_CHECKING:``, inside a function or a
``try``, relative ones resolved, and ``importlib.import_module`` / ``__import__`` with
a literal name. The probe imports every ``actors`` module in a fresh interpreter and
checks that no ``supervisor`` module came along through some other door.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

ROOT = REPO
ACTORS = ROOT / "actors"
FORBIDDEN = "supervisor"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path) -> list[str]:
    """The package a relative import in ``path`` starts from."""
    return list(path.relative_to(ROOT).parent.parts)


def imported_modules(source: str, path: Path) -> list[str]:
    """Every module name ``source`` (the text of ``path``) may import, absolute."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                package = _package_of(path)
                up = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
                base = ".".join([*up, *([node.module] if node.module else [])])
            found.append(base)
            # "from . import x" may name a module x as well as a name in the package.
            found.extend(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append(node.args[0].value)
    return found


def forbidden(name: str) -> bool:
    return name == FORBIDDEN or name.startswith(FORBIDDEN + ".")


def layering_violations(source: str, path: Path) -> list[str]:
    return [name for name in imported_modules(source, path) if forbidden(name)]


def test_actors_never_import_supervisor() -> None:
    files = sorted(ACTORS.rglob("*.py"))
    assert len(files) > 50  # the walk really found the package
    offenders = {
        str(path.relative_to(ROOT)): bad
        for path in files
        if (bad := layering_violations(path.read_text(encoding="utf-8"), path))
    }
    assert offenders == {}, f"actors/ must not import supervisor/: {offenders}"


TYPE_CHECKING_IMPORT = """\
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from supervisor.service import Supervisor
"""


def test_the_static_check_sees_every_import_form() -> None:
    here = ACTORS / "connection" / "example.py"
    cases = {
        "import supervisor\n": ["supervisor"],
        "import json, supervisor.settings.net as n\n": ["supervisor.settings.net"],
        "from supervisor.settings.net import parse_bind\n": [
            "supervisor.settings.net",
            "supervisor.settings.net.parse_bind",
        ],
        "from supervisor import service\n": ["supervisor", "supervisor.service"],
        TYPE_CHECKING_IMPORT: ["supervisor.service", "supervisor.service.Supervisor"],
        "def f():\n    import supervisor.cli\n": ["supervisor.cli"],
        "try:\n    import supervisor\nexcept ImportError:\n    pass\n": ["supervisor"],
        "from ... import supervisor\n": ["supervisor"],
        "from ...supervisor.settings.net import Bind\n": [
            "supervisor.settings.net",
            "supervisor.settings.net.Bind",
        ],
        "import importlib\nimportlib.import_module('supervisor.calls.turns')\n": ["supervisor.calls.turns"],
        "__import__('supervisor')\n": ["supervisor"],
    }
    for source, expected in cases.items():
        assert layering_violations(source, here) == expected, source
    # Names that only look alike, and relative imports that stay inside actors/, pass.
    for source in (
        "import supervisors\n",
        "from actors.supervisor_like import x\n",
        "from . import states\n",
        "from .. import protocol\n",
        "from ..router import supervisor\n",  # actors.router.supervisor, not the package
    ):
        assert layering_violations(source, here) == [], source


_PROBE = """
import importlib, json, pkgutil, sys
import actors
names = sorted(m.name for m in pkgutil.walk_packages(actors.__path__, "actors."))
for name in names:
    importlib.import_module(name)
print(json.dumps({"imported": names, "loaded": sorted(sys.modules)}))
"""


def test_importing_every_actor_module_loads_no_supervisor_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert "actors.connection.actor" in result["imported"] and "actors.router.actor" in result["imported"]
    loaded = [m for m in result["loaded"] if forbidden(m)]
    assert loaded == []
