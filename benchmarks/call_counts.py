"""Function calls per ``tools/call``, counted (deterministic; no clock involved).

    .venv/bin/python benchmarks/call_counts.py [--tree DIR] [--calls N] [--warmup N]
                                               [--opcodes] [--top K] [--json OUT] [--plain]
    .venv/bin/python benchmarks/call_counts.py --diff BEFORE.json AFTER.json [--top K]

The workload of ``bench_calls.py --client ours``, sequential part: ``Supervisor.open``
with one trusted stdio server (benchmarks/minimal_server.py), one session, one turn,
``--warmup`` calls, then ``--calls`` sequential ``turn.call("bench_echo", {"text": "hi"})``
counted with ``sys.setprofile`` (and ``threading.setprofile`` for the supervisor's own
threads): every Python function entered (a coroutine or generator resumed counts as
entered again, as in cProfile) and every C function called from Python, per function,
divided by ``--calls``. ``--opcodes`` also counts the bytecode instructions each
function executes (``sys.settrace`` with ``f_trace_opcodes``; several times slower).
Keys are ``path:qualname``, the path relative to the tree, to site-packages or to the
standard library, so two trees compare by name even when line numbers moved.

Every entry is also put in one of three parts:

* ``trio``: Trio's own code (and ``outcome``'s): the scheduler and its I/O, which take
  one path or another depending on whether the server's answer is already in the pipe;
* ``store``: whatever runs under a function of ``supervisor/store/`` (the journal, the
  store actor, its SQLite thread; our helpers and library code they call included),
  whose batches, and so their cost per call, depend on timing;
* ``call path``: the rest of our code (``supervisor/``, ``actors/``, attrs' methods of
  our classes) and the library code it calls (library code goes with its nearest
  caller that is ours or Trio's). The same in every run of one tree, to the last
  bytecode: the number to compare.

``--tree DIR`` imports ``supervisor`` from DIR (default: the tree this script is in),
so one venv measures another commit checked out in a git worktree::

    git worktree add --detach ../base 0ab3b8f
    .venv/bin/python benchmarks/call_counts.py --tree ../base --opcodes --json before.json
    .venv/bin/python benchmarks/call_counts.py --opcodes --json after.json
    .venv/bin/python benchmarks/call_counts.py --diff before.json after.json

``--above ENTRIES`` exits 1 when the call path enters more functions per call than
that, 0 otherwise: a test for ``git bisect run`` (see RESULTS.md). The counts of the
call path are exact with few calls (``--calls 50 --warmup 20``).

``--plain`` makes the same calls without counting, for an instruction count of the
whole process (subtract a ``--calls 0`` run; RESULTS.md says why such totals swing
from run to run)::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --separate-threads=yes \\
        .venv/bin/python benchmarks/call_counts.py --plain --calls 2000

Only the public API is used (``supervisor.Supervisor``, ``supervisor.load_config``), so
the script measures any commit that has them. By hand only, never from the test suite.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import sysconfig
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
SERVER = HERE / "minimal_server.py"
PARTS = ("call path", "store", "trio")
_OURS = ("supervisor/", "actors/")
_TRIO = ("site:trio/", "site:outcome/")
_LIBRARY = ""  # library code: its part is its nearest caller's

Tracer = Callable[[FrameType, str, Any], Any]


def _prefixes(tree: Path) -> list[tuple[str, str]]:
    """Path prefixes to strip from code file names, longest first, with their labels."""
    paths = sysconfig.get_paths()
    found = {
        (str(tree) + os.sep, ""),
        (paths["purelib"] + os.sep, "site:"),
        (paths["platlib"] + os.sep, "site:"),
        (paths["stdlib"] + os.sep, "stdlib:"),
    }
    return sorted(found, key=lambda item: -len(item[0]))


def _own_part(name: str) -> str:
    """The part a function is in by itself (``_LIBRARY``: its caller's)."""
    if name.startswith("<attrs generated methods "):  # attrs' __init__ etc. of one class
        name = name.removeprefix("<attrs generated methods ").replace(".", "/")
    if name.startswith("supervisor/store/"):
        return "store"
    if name.startswith(_OURS):
        return "call path"
    if name.startswith(_TRIO) or name.startswith(("trio/", "outcome/")):
        return "trio"
    return _LIBRARY


class Counts:
    """Function entries, C calls and (``opcodes``) bytecode instructions, per function
    and per part, across the threads hooked."""

    def __init__(self, tree: Path, *, opcodes: bool = False) -> None:
        self.py: Counter[tuple[str, str]] = Counter()  # by (part, name)
        self.ops: Counter[tuple[str, str]] = Counter()
        self.c: Counter[str] = Counter()
        self.opcodes = opcodes
        self.on = False
        self._prefixes = _prefixes(tree)
        self._names: dict[CodeType, tuple[str, str]] = {}

    def _named(self, code: CodeType) -> tuple[str, str]:
        known = self._names.get(code)
        if known is None:
            path = code.co_filename
            for prefix, label in self._prefixes:
                if path.startswith(prefix):
                    path = label + path[len(prefix) :]
                    break
            name = f"{path}:{code.co_qualname}"
            known = self._names[code] = (name, _own_part(name))
        return known

    def _part(self, frame: FrameType) -> tuple[str, str]:
        """The function's name and part: Trio's own code is ``trio``; anything run
        under a function of the store (our helpers and library code included) is
        ``store``; the rest is ours (``call path``) or library code, which goes with
        its nearest caller."""
        name, part = self._named(frame.f_code)
        if part == "trio":
            return name, part
        caller: FrameType | None = frame.f_back
        while caller is not None and part != "store":
            above = self._named(caller.f_code)[1]
            if not part or above == "store":
                part = above
            caller = caller.f_back
        return name, part or "trio"  # library code with no caller of ours: the loop's

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on:
            return
        if event == "call":
            self.py[self._part(frame)[::-1]] += 1
        elif event == "c_call":
            self.c[f"{getattr(arg, '__module__', None) or ''}.{getattr(arg, '__qualname__', arg)}"] += 1

    def trace(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        if not self.on:
            return None
        key, ops = self._part(frame)[::-1], self.ops

        def opcode(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == "opcode" and self.on:
                ops[key] += 1
            return opcode

        frame.f_trace_opcodes = True
        return opcode

    def install(self) -> None:
        """Hook every thread started from now on (the supervisor's own, at open)."""
        threading.setprofile(self.profile)
        if self.opcodes:
            threading.settrace(self.trace)

    def start(self) -> None:
        sys.setprofile(self.profile)
        if self.opcodes:
            sys.settrace(self.trace)
        self.on = True

    def stop(self) -> None:
        self.on = False
        sys.setprofile(None)
        sys.settrace(None)


async def _run(args: argparse.Namespace, counts: Counts) -> None:
    import trio

    from supervisor import Supervisor, load_config

    with tempfile.TemporaryDirectory(prefix="call-counts-") as scratch:
        config_file = Path(scratch) / "config.json"
        server = {
            "command": [sys.executable, str(SERVER)],
            "trusted": True,
            "start": "lazy",
            "reconnect_schedule_s": [0],
            "init_timeout_ms": 60_000,
        }
        config_file.write_text(json.dumps({"servers": {"bench": server}}))
        config = load_config(config_file)
        async with (
            Supervisor.open(config, state_dir=Path(scratch) / "state") as sup,
            sup.session() as session,
        ):
            turn = await session.begin_turn()
            for _ in range(args.warmup):
                result = await turn.call("bench_echo", {"text": "hi"})
                assert result.ok and result.text == "hi", result
            await trio.sleep(0.2)  # let the warm-up's audit rows settle first
            if not args.plain:
                counts.start()
            try:
                for _ in range(args.calls):
                    await turn.call("bench_echo", {"text": "hi"})
            finally:
                counts.stop()


def _per_call(counts: Counter[str], calls: int) -> dict[str, float]:
    return {name: n / calls for name, n in counts.most_common()}


def _by_part(counts: Counter[tuple[str, str]], calls: int) -> dict[str, dict[str, float]]:
    """``{part: {function: count per call}}``, largest first."""
    parts: dict[str, Counter[str]] = {part: Counter() for part in PARTS}
    for (part, name), n in counts.items():
        parts[part][name] += n
    return {part: _per_call(named, calls) for part, named in parts.items()}


def _totals(by_part: dict[str, dict[str, float]]) -> dict[str, float]:
    return {part: sum(named.values()) for part, named in by_part.items()}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the workload from ``args.tree`` and return the counts per call."""
    tree = Path(args.tree).resolve()
    sys.path.insert(0, str(tree))
    import supervisor

    where = Path(supervisor.__file__).resolve().parent.parent
    if where != tree:
        raise SystemExit(f"supervisor was imported from {where}, not {tree}")
    logging.disable(logging.WARNING)
    import trio

    counts = Counts(tree, opcodes=args.opcodes)
    if not args.plain:
        counts.install()
    trio.run(_run, args, counts)
    calls = max(args.calls, 1)
    return {
        "tree": str(tree),
        "calls": args.calls,
        "c_total": sum(counts.c.values()) / calls,
        "py": _by_part(counts.py, calls),
        "ops": _by_part(counts.ops, calls) if args.opcodes else {},
        "c": _per_call(counts.c, calls),
    }


def _parts(by_part: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{part} {n:.1f}" for part, n in _totals(by_part).items())


def _print_one(data: dict[str, Any], top: int) -> None:
    print(f"tree {data['tree']}: {data['calls']} calls counted; per tools/call:")
    print(f"  Python function entries: {_parts(data['py'])}")
    if data["ops"]:
        print(f"  bytecode instructions:   {_parts(data['ops'])}")
    print(f"  C functions called from Python: {data['c_total']:.1f}")
    columns = "entries, bytecode instructions" if data["ops"] else "entries"
    print(f"the call path's functions, most entered first ({columns}):")
    ops = data["ops"].get("call path", {}) if data["ops"] else {}
    for name, n in list(data["py"]["call path"].items())[:top]:
        print(f"{n:9.2f}  {ops[name]:9.1f}  {name}" if ops else f"{n:9.2f}  {name}")


def _print_changes(label: str, a: dict[str, float], b: dict[str, float], top: int) -> None:
    delta = {name: b.get(name, 0.0) - a.get(name, 0.0) for name in set(a) | set(b)}
    shown = [item for item in sorted(delta.items(), key=lambda item: -abs(item[1])) if abs(item[1]) >= 0.05]
    print(f"{label}, largest changes first (before -> after):")
    for name, change in shown[:top]:
        print(f"  {change:+8.2f}  {a.get(name, 0.0):8.2f} -> {b.get(name, 0.0):8.2f}  {name}")


def _print_diff(before: dict[str, Any], after: dict[str, Any], top: int) -> None:
    for kind, label in (("py", "Python function entries"), ("ops", "bytecode instructions")):
        if not before[kind] or not after[kind]:
            continue
        was, now = _totals(before[kind]), _totals(after[kind])
        print(f"{label} per tools/call:")
        for part in PARTS:
            print(f"  {part:>9}: {was[part]:8.1f} -> {now[part]:8.1f} ({now[part] - was[part]:+.1f})")
    _print_changes("call path: entries by function", before["py"]["call path"], after["py"]["call path"], top)
    if before["ops"] and after["ops"]:
        a, b = before["ops"]["call path"], after["ops"]["call path"]
        _print_changes("call path: bytecode instructions by function", a, b, top)
    _print_changes("C functions called from Python (all parts)", before["c"], after["c"], top)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(HERE.parent), help="import supervisor from this tree")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--opcodes", action="store_true", help="also count bytecode instructions (slower)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--json", help="also write every count to this file")
    parser.add_argument("--plain", action="store_true", help="make the calls without counting (valgrind)")
    parser.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two --json files")
    parser.add_argument(
        "--above",
        type=float,
        metavar="ENTRIES",
        help="for git bisect run: exit 1 when the call path enters more functions per call than this",
    )
    args = parser.parse_args()
    if args.diff:
        before, after = (json.loads(Path(name).read_text()) for name in args.diff)
        _print_diff(before, after, args.top)
        return 0
    data = measure(args)
    if args.plain:
        print(f"{args.calls} calls made, not counted (--plain)")
        return 0
    _print_one(data, args.top)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    if args.above is not None:
        return 1 if _totals(data["py"])["call path"] > args.above else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
