"""Two commits side by side in one run: each checked out in a git worktree of its own.

    .venv/bin/python benchmarks/compare.py BASE [HEAD] [-- run.py options]
    .venv/bin/python benchmarks/compare.py 20858eb -- --reps 5

Checks out BASE and HEAD (default: ``HEAD``, the committed state; uncommitted changes
are left out on purpose) into temporary worktrees, then runs HEAD's ``run.py --only
calls memory http import --baseline <BASE's worktree>``, so every section interleaves
``ours-before`` (BASE's code) with ``ours`` (HEAD's) and the peers. The worktrees are
removed afterwards. By hand only, never from the test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SECTIONS = ("calls", "memory", "http", "import")


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
            for which, commit in (("base", base), ("head", head)):
                _git("worktree", "add", "--detach", str(trees[which]), commit)
            print(f"base {base[:10]} ({_git('log', '-1', '--format=%s', base).strip()})", flush=True)
            print(f"head {head[:10]} ({_git('log', '-1', '--format=%s', head).strip()})", flush=True)
            command = [
                sys.executable,
                str(trees["head"] / "benchmarks" / "run.py"),
                *run_options,
                "--baseline",
                str(trees["base"]),
            ]
            return subprocess.run(command, cwd=trees["head"], check=False).returncode
        finally:
            for tree in trees.values():
                if tree.exists():
                    _git("worktree", "remove", "--force", str(tree))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
