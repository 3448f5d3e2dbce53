"""``supervisor/`` has no import cycle, read from the source with ``ast`` (its floors:
``test_floors.py``, which reads the same graph).

Every import counts: those under ``if TYPE_CHECKING:`` (a cycle hidden there is
still a cycle of the design: the modules cannot be understood one without the other)
and those inside functions. (That ``actors/`` never imports ``supervisor/`` is
``tests/project/test_layering.py``'s.)

An edge goes to the module an import names: ``from supervisor.store import AuditRow``
to the package ``supervisor.store``, ``from supervisor import service`` to the module
``supervisor.service``. The parent packages Python runs first (``supervisor/__init__``
for ``supervisor.calls.turns``) are not edges: a package's ``__init__`` re-exporting its
modules is not a cycle with them.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from tests.support.paths import REPO

ROOT = REPO

Graph = Mapping[str, frozenset[str]]


def module_name(path: Path, root: Path = ROOT) -> str:
    """``supervisor/store/__init__.py`` → ``supervisor.store``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``package`` (a directory under ``root``) by dotted name."""
    return {module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}


def imported_names(source: str, module: str, is_package: bool, modules: Collection[str]) -> Iterator[str]:
    """Every module ``source`` imports, wherever the import statement stands, as a
    dotted name (relative imports resolved). ``from X import y`` imports the module
    ``X.y`` when there is one (in ``modules``), else a name of ``X``."""
    here = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                anchor = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in modules else base


def import_graph(package: str, root: Path = ROOT) -> Graph:
    """Module → the modules of ``package`` it imports."""
    modules = modules_of(package, root)
    graph: dict[str, frozenset[str]] = {}
    for name, path in modules.items():
        imported = imported_names(path.read_text(), name, path.name == "__init__.py", modules)
        graph[name] = frozenset(m for m in imported if m in modules and m != name)
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle (its modules in order, the first repeated at the end), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, edges = stack[-1]
            for nxt in edges:
                if nxt in on_path:
                    return [*path[path.index(nxt) :], nxt]
                if nxt not in done:
                    stack.append((nxt, iter(sorted(graph[nxt]))))
                    path.append(nxt)
                    on_path.add(nxt)
                    break
            else:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
    return None


def test_supervisor_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph("supervisor"))
    assert cycle is None, "import cycle in supervisor/: " + " → ".join(cycle or ())


# ------------------------------------------------------------ the checks can fail


def _tree(root: Path, files: Mapping[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_a_cycle_hidden_behind_type_checking_is_found(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": "from pkg.b import B\nclass A: ...\n",
            "pkg/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import C\nclass B: ...\n"
            ),
            "pkg/c.py": "def f():\n    from . import a\n    return a\n",
        },
    )
    graph = import_graph("pkg", tmp_path)
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_a_package_reexporting_its_modules_is_no_cycle(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\nfrom pkg.sub import S\n",
            "pkg/a.py": "from pkg.sub.s import S\nclass A: ...\n",
            "pkg/sub/__init__.py": "from pkg.sub.s import S\n",
            "pkg/sub/s.py": "class S: ...\n",
        },
    )
    graph = import_graph("pkg", tmp_path)
    assert graph["pkg.a"] == {"pkg.sub.s"}
    assert find_cycle(graph) is None


_IMPORT_EACH_FIRST = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("supervisor", "actors")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def test_every_module_imports_when_it_is_imported_first() -> None:
    """The runtime side of the graph above: importing one module first (as a plugin,
    a script or a test does) runs its parent packages' ``__init__`` too, and a package
    that imports its own modules eagerly can close a cycle the graph does not count."""
    import subprocess
    import sys

    names = sorted({*modules_of("supervisor"), *modules_of("actors")})
    halves = [names[0::2], names[1::2]]  # two interpreters at once: about 8 s, not 17
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _IMPORT_EACH_FIRST, *half], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for half in halves
    ]
    failed = [run.communicate(timeout=120)[0].strip() for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert "\n".join(f for f in failed if f) == ""
