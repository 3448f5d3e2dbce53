"""The leanest stdio MCP server we could write, for benchmarks (run by hand; not a test).

    python benchmarks/minimal_server.py [--crash-after N] [--list-changed-every N]
                                        [--tools-file PATH]

Newline-delimited JSON-RPC 2.0 on fd 0 / fd 1, stdlib plus orjson when importable
(the standard library's json otherwise). One tool, ``echo {text}``. Answers
``initialize`` (echoing the client's protocol version), ``ping``, ``tools/list`` and
``tools/call``; notifications (``notifications/initialized``, ``…/cancelled``) are
read and ignored; any other request gets -32601.

Why it is fast: no threads, no asyncio, no argparse. It reads whatever the pipe holds
(``os.read``, up to 256 KiB), answers every complete line in it, and writes all the
answers with one ``os.write``: pipelined requests cost one read and one write per
batch, not per message. Every call is answered at once, in order.

Flags (for soak and kill runs):
  --crash-after N         the N-th tools/call is not answered: the process exits
                          (status 1) as soon as it reads it, like a crash mid-call
  --list-changed-every N  after every N-th tools/call, toggle a second tool
                          (``extra``) in the list and send
                          notifications/tools/list_changed
  --tools-file PATH       publish the tools in PATH (a JSON list of tool objects)
                          after echo, e.g. 200 tools with long descriptions for
                          tool_search and begin_turn measurements
"""

from __future__ import annotations

import os
import sys

try:
    import orjson

    _loads = orjson.loads
    _dumps = orjson.dumps
except ImportError:  # pragma: no cover - the benchmark venv has orjson
    import json

    _loads = json.loads

    def _dumps(obj: object) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


ECHO = {
    "name": "echo",
    "description": "Echo the given text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}
EXTRA = {
    "name": "extra",
    "description": "A tool that comes and goes with list_changed.",
    "inputSchema": {"type": "object", "properties": {}},
}
LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'


def _flag(argv: list[str], name: str) -> str | None:
    if name in argv:
        return argv[argv.index(name) + 1]
    return None


def main(argv: list[str]) -> None:
    crash_after = int(_flag(argv, "--crash-after") or 0)
    list_changed_every = int(_flag(argv, "--list-changed-every") or 0)
    tools_file = _flag(argv, "--tools-file")
    published: list[object] = [ECHO]
    if tools_file:
        with open(tools_file, "rb") as f:
            published.extend(_loads(f.read()))
    extra_on = False
    calls = 0
    pending = b""
    read, write = os.read, os.write
    while True:
        try:
            chunk = read(0, 262144)
        except OSError:
            chunk = b""
        if not chunk:
            os._exit(0)  # stdin closed: the client wants us gone
        if b"\n" not in chunk:
            pending += chunk
            continue
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        out: list[bytes] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                msg = _loads(line)
                method = msg.get("method")
            except Exception:  # not JSON, or not an object
                out.append(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n')
                continue
            if "id" not in msg or method is None:
                continue  # a notification (initialized, cancelled) or a stray response
            rid = msg["id"]
            params = msg.get("params") or {}
            if method == "tools/call":
                calls += 1
                if calls == crash_after:
                    if out:
                        _write_all(write, b"".join(out))
                    os._exit(1)
                args = params.get("arguments") or {}
                text = args.get("text", "")
                result: object = {"content": [{"type": "text", "text": text}]}
                out.append(_dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + b"\n")
                if list_changed_every and calls % list_changed_every == 0:
                    extra_on = not extra_on
                    out.append(LIST_CHANGED)
                continue
            if method == "initialize":
                result = {
                    "protocolVersion": params.get("protocolVersion") or "2025-11-25",
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "minimal-server", "version": "0.1.0"},
                }
            elif method == "tools/list":
                result = {"tools": [*published, EXTRA] if extra_on else published}
            elif method == "ping":
                result = {}
            else:
                error = {"code": -32601, "message": f"Method not found: {method}"}
                out.append(_dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + b"\n")
                continue
            out.append(_dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + b"\n")
        if out:
            _write_all(write, b"".join(out))


def _write_all(write: object, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[write(1, view) :]  # type: ignore[operator]
    except OSError:
        os._exit(0)  # the client is gone


if __name__ == "__main__":
    main(sys.argv[1:])
