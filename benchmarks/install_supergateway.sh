#!/usr/bin/env bash
# Install supergateway (npm) into .venv/node-peers/supergateway (next to .ci/setup's
# .venv/node, outside the tree the tests read) for bench_bridge.py's comparison
# column; never part of the project or its tests. Prints the path of its launcher on
# the last line, or why it could not, on stderr, with exit status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=.venv/node-peers/supergateway
bin="$prefix/node_modules/.bin/supergateway"
if [ ! -x "$bin" ]; then
  npm=$(command -v npm || true)
  [ -z "$npm" ] && [ -x .venv/node/bin/npm ] && npm=.venv/node/bin/npm
  if [ -z "$npm" ]; then
    echo "no npm on PATH nor in .venv/node: install Node.js to compare with supergateway" >&2
    exit 1
  fi
  mkdir -p "$prefix"
  if ! "$npm" install --silent --no-audit --no-fund --prefix "$prefix" "supergateway@${SUPERGATEWAY_VERSION:-4}" >&2; then
    echo "npm could not install supergateway (no registry access?)" >&2
    exit 1
  fi
fi
echo "$(pwd)/$bin"
