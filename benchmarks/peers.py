"""The peers a user would pick instead of us, each installed in a folder of its own.

They pin different ``mcp`` versions from ours (and from each other), so none of them
goes into the project's virtualenv: each Python peer gets a virtualenv under
``benchmarks/.peers/<name>/`` and each npm peer an npm prefix there (the folder is
git-ignored). Installing is idempotent and happens on first use; a peer that cannot
be had (no registry, no npm) is reported with the reason, and its rows are skipped.

    python benchmarks/peers.py            # install (or check) every peer, print where
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers"

# name -> pip requirement (Python peers) or npm package spec (npm peers). The versions
# are the ones the issues measured against; the newest release in that line is taken.
PYTHON_PEERS = {"fastmcp": "fastmcp>=4.1,<5", "mcp-proxy": "mcp-proxy>=0.13,<0.14"}
NPM_PEERS = {"supergateway": "supergateway@^4.0.0"}


class Unavailable(Exception):
    """A peer that cannot be installed here; the message says why."""


def _python() -> str:
    """An interpreter for peer virtualenvs: ours (3.11+), never a peer's own."""
    return sys.executable if sys.version_info >= (3, 11) else shutil.which("python3.11") or sys.executable


def python_peer(name: str) -> Path:
    """The ``bin/`` folder of ``name``'s virtualenv, installed if it is not yet."""
    home = PEERS / name
    bin_dir = home / "bin"
    marker = home / ".installed"
    requirement = PYTHON_PEERS[name]
    if marker.exists() and marker.read_text() == requirement:
        return bin_dir
    if home.exists():
        shutil.rmtree(home)
    made = subprocess.run([_python(), "-m", "venv", str(home)], capture_output=True, text=True)
    if made.returncode != 0:
        raise Unavailable(f"{name}: python -m venv failed: {made.stderr.strip()[-300:]}")
    pip = subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", "--disable-pip-version-check", requirement],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        raise Unavailable(f"{name}: pip install {requirement!r} failed: {_tail(pip.stderr)}")
    marker.write_text(requirement)
    return bin_dir


def npm_peer(name: str) -> Path:
    """The executable ``name`` of an npm prefix of its own, installed if it is not yet."""
    home = PEERS / name
    executable = home / "node_modules" / ".bin" / name
    package = NPM_PEERS[name]
    marker = home / ".installed"
    if executable.exists() and marker.exists() and marker.read_text() == package:
        return executable
    npm = shutil.which("npm") or str(HERE.parent / ".venv" / "node" / "bin" / "npm")
    if not os.path.exists(npm):
        raise Unavailable(f"{name}: npm is not installed (install Node.js to compare with {name})")
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(home), package],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not executable.exists():
        raise Unavailable(f"{name}: npm install {package} failed: {_tail(done.stderr)}")
    marker.write_text(package)
    return executable


def install(name: str) -> Path:
    """Install (or check) the peer ``name``, Python or npm: its ``bin/`` folder or executable."""
    return python_peer(name) if name in PYTHON_PEERS else npm_peer(name)


def version(name: str) -> str:
    """The installed version of a peer (for the report), or ``?``."""
    if name in NPM_PEERS:
        manifest = PEERS / name / "node_modules" / name / "package.json"
        return str(json.loads(manifest.read_text()).get("version", "?")) if manifest.exists() else "?"
    found = list((PEERS / name / "lib").glob(f"python3*/site-packages/{name.replace('-', '_')}-*.dist-info"))
    return found[0].name.removesuffix(".dist-info").split("-")[1] if found else "?"


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith("WARNING: Location")]
    return " | ".join(lines[-3:]) or "(no output)"


def main() -> int:
    for name in (*PYTHON_PEERS, *NPM_PEERS):
        try:
            where = install(name)
            print(f"{name} {version(name)}: {where}")
        except Unavailable as exc:
            print(f"skipped: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
