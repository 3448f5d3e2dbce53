"""Two commits side by side in one run: each checked out in a git worktree of its own.

    .venv/bin/python benchmarks/compare.py BASE [HEAD] [-- run.py options]
    .venv/bin/python benchmarks/compare.py 20858eb -- --only calls gateway bridge

Checks out BASE and HEAD (default: ``HEAD``, the committed state; uncommitted changes
are left out on purpose) into temporary worktrees, then runs this checkout's
``run.py --only calls gateway bridge memory http import --baseline <BASE's worktree>
--code <HEAD's worktree>``: the measuring code is this checkout's ``benchmarks/``, the
code measured is each worktree's, reached only through what survives a move of the
project's modules (``python -m supervisor.cli serve`` and ``from supervisor import
Supervisor, load_config``, each process started in its worktree with ``PYTHONPATH``
naming it; the report says which file ``supervisor`` was imported from, per side).
Every section interleaves ``ours-before`` (BASE) with ``ours`` (HEAD) and the peers
round by round (``interleave.py``), and prints medians (min-max), ours ÷ ours-before
per metric, and the load average at its start and end; ``gateway`` puts both
``serve``'s ``/mcp`` next to mcp-proxy, ``bridge`` both ``/v1/bridge`` next to
supergateway's WebSocket mode (``peers.py`` installs them). The worktrees are removed
afterwards. By hand only, never from the test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SECTIONS = ("calls", "gateway", "bridge", "memory", "http", "import")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def main(argv: list[str]) -> int:
    cut = argv.index("--") if "--" in argv else len(argv)
    ours, passthrough = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the commit before (e.g. the last commit before an issue)")
    parser.add_argument("head", nargs="?", default="HEAD", help="the commit after (default HEAD)")
    args = parser.parse_args(ours)
    base, head = _git("rev-parse", args.base).strip(), _git("rev-parse", args.head).strip()
    run_options = passthrough if "--only" in passthrough else ["--only", *DEFAULT_SECTIONS, *passthrough]
    with tempfile.TemporaryDirectory(prefix="mcp-compare-") as scratch:
        trees = {"base": Path(scratch) / "base", "head": Path(scratch) / "head"}
        try:
            compared = []
            for which, commit in (("base", base), ("head", head)):
                _git("worktree", "add", "--detach", str(trees[which]), commit)
                row = "ours-before" if which == "base" else "ours"
                subject = _git("log", "-1", "--format=%s", commit).strip()
                compared += ["--compared", f"{which} {commit[:10]} ({subject}) as {row}"]
                print(f"{which} {commit[:10]} ({subject})", flush=True)
            command = [
                sys.executable,
                str(ROOT / "benchmarks" / "run.py"),
                *run_options,
                *compared,
                *("--baseline", str(trees["base"]), "--code", str(trees["head"])),
            ]
            return subprocess.run(command, cwd=ROOT, check=False).returncode
        finally:
            for tree in trees.values():
                if tree.exists():
                    _git("worktree", "remove", "--force", str(tree))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
