"""The floor plan, read from the source: which package of ``supervisor/`` may import which.

``docs/architecture.md`` draws it. From the top floor down::

    cli → (server | adapters) → (admin | gateway | bridge | aio) → service → sessions → calls
        → web → runtime → (store | settings) → actors

A package may import any package on a floor below its own, never one above it, and
never another on its own floor: ``admin``, ``gateway`` and ``bridge`` read each other
only through ``web``'s interfaces, which ``server`` wires; ``aio`` (the embedding API
for asyncio hosts, over ``service``) reads none of them. ``adapters`` (the agent
frameworks' in-process tools) stands on ``aio`` alone: of ours it imports nothing else,
``actors`` included (``test_the_adapters_stand_on_aio_alone``). ``web`` sits above
``runtime`` because its interfaces name runtime's metric families. ``supervisor``'s own
``__init__`` (the embedding API's face) re-exports from below and is on no floor.
``actors/`` is below everything (and never imports ``supervisor/``: ``test_layering.py``);
its packages import each other without a cycle. The graph is ``test_import_graph.py``'s:
every import counts, ``TYPE_CHECKING`` and function-level ones too.

A package a later issue adds names its floor here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tests.project.test_import_graph import Graph, find_cycle, import_graph, imported_names, modules_of
from tests.support.paths import REPO

FLOORS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("server", "adapters"),
    ("admin", "gateway", "bridge", "aio", "console"),
    ("service",),
    ("sessions",),
    ("calls",),
    ("web",),
    ("cluster",),
    ("runtime",),
    ("store", "settings"),
)
"""Top floor first."""
FRAMEWORKS = ("quart", "quart_trio", "werkzeug")
MOUNTED_APPS = ("supervisor.gateway.http_app", "supervisor.bridge.asgi_app", "supervisor.console.app")


def unit(module: str, depth: int = 1) -> str | None:
    """The package (or top-level module) a module belongs to: ``supervisor.calls.turns``
    → ``calls``; None for the package itself."""
    parts = module.split(".")
    return parts[depth] if len(parts) > depth else None


def floor_violations(graph: Graph, floors: Sequence[Sequence[str]]) -> Iterator[str]:
    """Every import that breaks the plan, as ``a → b: why``."""
    floor = {name: level for level, names in enumerate(floors) for name in names}
    for module, imported in sorted(graph.items()):
        here = unit(module)
        if here is None:
            continue
        for target in sorted(imported):
            there = unit(target)
            if there is None or there == here:
                continue
            if here not in floor or there not in floor:
                missing = here if here not in floor else there
                yield f"{module} → {target}: {missing} is on no floor (name its floor in FLOORS)"
            elif floor[there] == floor[here]:
                yield f"{module} → {target}: {here} and {there} share a floor and never import each other"
            elif floor[there] < floor[here]:
                yield f"{module} → {target}: {there} is above {here}"


def test_supervisor_keeps_its_floors() -> None:
    broken = list(floor_violations(import_graph("supervisor"), FLOORS))
    assert not broken, "the floor plan is broken:\n" + "\n".join(broken)


def ours_beyond_aio(package: str = "supervisor/adapters", root: Path = REPO) -> Iterator[str]:
    """Every import of ``package``'s modules of a module of ours outside it and
    ``supervisor.aio``, as ``module → imported``."""
    inside = package.replace("/", ".")
    for name, path in modules_of(package, root).items():
        for target in imported_names(path.read_text(), name, path.name == "__init__.py", ()):
            ours = target.split(".")[0] in ("supervisor", "actors")
            allowed = target == "supervisor.aio" or target.startswith((f"{inside}.", "supervisor.aio."))
            if ours and not allowed and target != inside:
                yield f"{name} → {target}"


def test_the_adapters_stand_on_aio_alone() -> None:
    beyond = list(ours_beyond_aio())
    assert not beyond, "an adapter imports more of ours than supervisor.aio:\n" + "\n".join(beyond)


def package_graph(graph: Graph, depth: int = 1) -> Mapping[str, frozenset[str]]:
    """The graph between the packages (and top-level modules) of one tree."""
    edges: dict[str, set[str]] = {}
    for module, imported in graph.items():
        here = unit(module, depth)
        if here is not None:
            targets = {unit(target, depth) for target in imported}
            edges.setdefault(here, set()).update(t for t in targets if t is not None and t != here)
    return {name: frozenset(targets & edges.keys()) for name, targets in edges.items()}


def test_the_packages_of_actors_import_each_other_without_a_cycle() -> None:
    cycle = find_cycle(package_graph(import_graph("actors")))
    assert cycle is None, "a package cycle in actors/: " + " → ".join(cycle or ())


def test_the_mounted_apps_load_no_framework() -> None:
    """In a fresh interpreter, ``/mcp``'s, ``/v1/bridge``'s and ``/ui``'s apps load no Quart."""
    probe = (
        "import importlib, sys\n"
        f"for name in {MOUNTED_APPS!r}: importlib.import_module(name)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout


HEAVY_ON_DEMAND = (
    *FRAMEWORKS, "hypercorn", "h11", "h2", "httpx2", "httpx", "trio_websocket", "wsproto",
    "opentelemetry", "psycopg", "jsonschema", "mcp",
)  # fmt: skip
"""Packages ``import supervisor`` leaves alone: each is imported where it is first used
(an embedding host that never serves HTTP or reaches a remote server never pays for
them; ``benchmarks/`` times the import)."""


def test_import_supervisor_loads_nothing_heavy_before_it_is_used() -> None:
    probe = (
        "import sys, supervisor\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY_ON_DEMAND!r})))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_supervisor_holds_at_most_five_modules_of_its_own() -> None:
    modules = sorted(path.name for path in (REPO / "supervisor").glob("*.py"))
    assert len(modules) <= 5, modules


def test_package_faces_only_reexport() -> None:
    """A package's ``__init__`` holds a docstring, imports and ``__all__``: no code that
    runs on import, no lazy loader."""
    for init in sorted((REPO / "supervisor").rglob("__init__.py")):
        for node in ast.parse(init.read_text()).body:
            kept = isinstance(node, ast.Import | ast.ImportFrom) or (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            )
            is_all = isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
                "__all__"
            ]
            assert kept or is_all, f"{init.relative_to(REPO)}:{node.lineno} does more than re-export"


# ------------------------------------------------------------ the checks can fail


def test_an_import_up_sideways_or_off_the_plan_is_found() -> None:
    graph = {
        "supervisor.calls.turns": frozenset({"supervisor.sessions.session"}),
        "supervisor.admin.app": frozenset({"supervisor.gateway.core", "supervisor.web.guard"}),
        "supervisor.gadgets.x": frozenset({"supervisor.web.guard"}),
        "supervisor.web.guard": frozenset({"supervisor.store.records"}),
    }
    assert list(floor_violations(graph, FLOORS)) == [
        "supervisor.admin.app → supervisor.gateway.core: admin and gateway share a floor and never "
        "import each other",
        "supervisor.calls.turns → supervisor.sessions.session: sessions is above calls",
        "supervisor.gadgets.x → supervisor.web.guard: gadgets is on no floor (name its floor in FLOORS)",
    ]


def test_a_package_cycle_is_found(tmp_path: Path) -> None:
    graph = {
        "pkg.a.x": frozenset({"pkg.b.y"}),
        "pkg.b.y": frozenset({"pkg.c"}),
        "pkg.c": frozenset({"pkg.a.z"}),
        "pkg.a.z": frozenset(),
    }
    assert find_cycle(package_graph(graph)) == ["a", "b", "c", "a"]


def test_an_adapter_importing_more_than_aio_is_found(tmp_path: Path) -> None:
    adapters = tmp_path / "supervisor" / "adapters"
    adapters.mkdir(parents=True)
    (adapters / "__init__.py").write_text('"""Faces."""\n')
    (adapters / "output.py").write_text("from supervisor.aio import Envelope\n")
    (adapters / "framework.py").write_text(
        "import json\nimport actors.router\nfrom supervisor.calls import turns\n"
        "from supervisor.aio.turns import Turn\nfrom supervisor.adapters.output import Envelope\n"
    )
    assert sorted(ours_beyond_aio(root=tmp_path)) == [
        "supervisor.adapters.framework → actors.router",
        "supervisor.adapters.framework → supervisor.calls",
    ]
