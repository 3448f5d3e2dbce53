"""A small MCP server for tests and the demo: stdlib only, so it starts in ~50 ms.

Newline-delimited JSON-RPC 2.0 over stdin/stdout. Answers ``initialize`` (echoes a
known protocol version, else the newest), ``ping``, ``tools/list`` (paginated) and
``tools/call`` (each call in its own thread, so a slow call blocks neither other
calls nor pings); honours ``notifications/cancelled``; unknown methods get -32601.

Tools: echo {text}, add {a, b}, sleep {seconds}, progress {steps, interval},
fail, image, big {bytes}, add_tool {name} (then notifications/tools/list_changed),
crash (exit status 3 at once), whoami (with ``--whoami``), flood {count, level} (with
``--flood``), plus tool_0 … tool_{N-1} with ``--tools N``.

Flags (to script misbehaviour):
  --page-size N          tools/list page size (0, the default: everything in one page)
  --tools N              publish N extra generated tools tool_0 … tool_{N-1}
  --calls-log PATH       append one JSON line per tools/call received (with ``trace``: the
                         trace context of its ``_meta``, when it carried one)
  --methods-log PATH     append the method of every message received, one a line
  --tools-file PATH      also publish the tools of this JSON array, exactly as written
                         (schemas included); a call answers with its arguments
  --garbage              after answering initialize, write a non-JSON line
  --huge-line BYTES      after answering initialize, write one line of BYTES bytes
  --exit-during-init     exit (status 1) when initialize arrives, before answering
  --ignore-stdin-close   keep running when stdin closes
  --stop-reading         after answering initialize, never read stdin again (keep running)
  --ignore-sigterm       ignore SIGTERM
  --spawn-child          start a grandchild ``sleep 1000`` in our process group
                         (its pid goes to stderr as ``spawned child pid=N``)
  --stderr-lines N       write N lines to stderr at start (``stderr line 0`` …)
  --flaky SECONDS        exit with status 1 at a random time in [0.5, 1.5] x SECONDS
  --surface              also serve resources and prompts: the resource ``mini://notes``
                         (text ``mini notes``, no templates) and the prompt ``greet``
                         {who*} (``Hello, <who>``)
  --whoami               publish ``whoami``: this process's pid, the time it started and
                         the time ``initialize`` came (wall clock, s), and the client's
                         capabilities from ``initialize``, as JSON text
  --flood                publish ``flood``: send ``count`` log messages
                         (``notifications/message``) at ``level`` as fast as the pipe
                         takes them, whatever ``logging/setLevel`` said, then answer
  --escape               daemonize on the first tools/call, as some servers do: a
                         grandchild leaves our session, ignores SIGTERM and keeps our
                         pipes open (``sleep 1000``; its pid goes to stderr as
                         ``escaped child pid=N``); we exit (status 4) without answering
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from typing import Any

STARTED = time.time()

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST = PROTOCOL_VERSIONS[-1]
# A 1x1 transparent PNG.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
VERBS = ("search", "create", "delete", "list", "summarize", "translate", "convert", "fetch")
NOUNS = ("files", "emails", "calendar events", "invoices", "images", "tickets", "repositories")
EXTRAS = ("by date", "for a customer", "in a folder", "with filters", "as PDF", "in bulk")

_out_lock = threading.Lock()


def log(text: str) -> None:
    sys.stderr.write(f"mini_server: {text}\n")
    sys.stderr.flush()


def write_raw(data: bytes) -> None:
    with _out_lock:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except (BrokenPipeError, ValueError):
            os._exit(0)  # the client is gone; nothing left to do


def send(message: dict[str, Any]) -> None:
    write_raw(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def schema(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": t} for k, t in props.items()},
        "required": list(props),
    }


NOTES = {"uri": "mini://notes", "name": "notes", "mimeType": "text/plain"}
GREET = {"name": "greet", "description": "Greet someone.", "arguments": [{"name": "who", "required": True}]}
SURFACE: dict[str, Any] = {  # with --surface: method -> its answer to the params
    "resources/list": lambda params: {"resources": [NOTES]},
    "resources/templates/list": lambda params: {"resourceTemplates": []},
    "resources/read": lambda params: {"contents": [{**NOTES, "text": "mini notes"}]},
    "prompts/list": lambda params: {"prompts": [GREET]},
    "prompts/get": lambda params: {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": f"Hello, {params['arguments']['who']}"}}
        ]
    },
}


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.cancel_events: dict[Any, threading.Event] = {}
        self.tools: dict[str, dict[str, Any]] = {}
        self._add("echo", "Echo the given text back.", schema(text="string"))
        self._add("add", "Add two numbers.", schema(a="number", b="number"))
        self._add("sleep", "Sleep for some seconds, then answer.", schema(seconds="number"))
        self._add(
            "progress",
            "Report progress every interval seconds, then answer.",
            schema(steps="integer", interval="number"),
        )
        self._add("fail", "Always fails (isError).", schema())
        self._add("image", "Return a tiny PNG and a caption.", schema())
        self._add("big", "Return a text of the given size in bytes.", schema(bytes="integer"))
        self._add("add_tool", "Register a new tool and announce it.", schema(name="string"))
        self._add("crash", "Exit the server process at once (status 3).", schema())
        if args.whoami:
            self._add(
                "whoami", "Who answers: pid, start and initialize times, client capabilities.", schema()
            )
        if args.flood:
            self._add(
                "flood",
                "Send count log messages at level, then answer.",
                schema(count="integer", level="string"),
            )
        self.initialized: dict[str, Any] = {}
        for i in range(args.tools):
            verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS)) % len(NOUNS)]
            extra = EXTRAS[i % len(EXTRAS)]
            self._add(f"tool_{i}", f"{verb.capitalize()} {noun} {extra}.", schema())
        if args.tools_file:
            with open(args.tools_file, encoding="utf-8") as f:
                self.tools.update((tool["name"], tool) for tool in json.load(f))

    def _add(self, name: str, description: str, input_schema: dict[str, Any]) -> None:
        self.tools[name] = {"name": name, "description": description, "inputSchema": input_schema}

    # -- dispatch -------------------------------------------------------------------

    def handle_line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            return
        if not isinstance(message, dict):
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid"}})
            return
        method, params = message.get("method"), message.get("params") or {}
        if method is None:
            return  # a response to nothing we asked: ignore
        if self.args.methods_log:
            with self.lock, open(self.args.methods_log, "a", encoding="utf-8") as f:
                f.write(f"{method}\n")
        if "id" not in message:
            self.handle_notification(method, params)
            return
        request_id = message["id"]
        if method == "tools/call":
            event = threading.Event()
            with self.lock:
                self.cancel_events[request_id] = event
            threading.Thread(target=self.call_tool, args=(request_id, params, event), daemon=True).start()
            return
        try:
            result = self.handle_request(method, params)
        except LookupError as exc:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": exc.args[0], "message": exc.args[1]}})
            return
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
        if method == "initialize":
            self.after_initialize()

    def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            log(f"cancelled request {request_id!r}: {params.get('reason', '')}")
            with self.lock:
                event = self.cancel_events.get(request_id)
            if event is not None:
                event.set()

    def handle_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            if self.args.exit_during_init:
                log("exiting during initialize, as asked")
                os._exit(1)
            asked = params.get("protocolVersion")
            self.initialized = {"at": time.time(), "capabilities": params.get("capabilities")}
            capabilities: dict[str, Any] = {"tools": {"listChanged": True}}
            if self.args.surface:
                capabilities.update(resources={}, prompts={})
            return {
                "protocolVersion": asked if asked in PROTOCOL_VERSIONS else LATEST,
                "capabilities": capabilities,
                "serverInfo": {"name": "mini-server", "version": "0.1.0"},
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return self.list_tools(params.get("cursor"))
        if self.args.surface and method in SURFACE:
            return SURFACE[method](params)
        raise LookupError(-32601, f"Method not found: {method}")

    def after_initialize(self) -> None:
        if self.args.garbage:
            write_raw(b"this is not json\n")
        if self.args.huge_line:
            with _out_lock:
                remaining = self.args.huge_line - 1
                while remaining > 0:
                    n = min(remaining, 65536)
                    sys.stdout.buffer.write(b"x" * n)
                    remaining -= n
                sys.stdout.buffer.write(b"\n")
                sys.stdout.buffer.flush()

    def list_tools(self, cursor: str | None) -> dict[str, Any]:
        with self.lock:
            tools = list(self.tools.values())
        size = self.args.page_size or len(tools) or 1
        try:
            start = int(cursor) if cursor is not None else 0
        except ValueError:
            raise LookupError(-32602, f"Invalid cursor: {cursor!r}") from None
        page: dict[str, Any] = {"tools": tools[start : start + size]}
        if start + size < len(tools):
            page["nextCursor"] = str(start + size)
        return page

    # -- tools ----------------------------------------------------------------------

    def call_tool(self, request_id: Any, params: dict[str, Any], cancel: threading.Event) -> None:
        if self.args.escape:
            escape()
        name = params.get("name")
        args = params.get("arguments") or {}
        if self.args.calls_log:
            with self.lock, open(self.args.calls_log, "a", encoding="utf-8") as f:
                line = {"id": request_id, "name": name, "arguments": args}
                meta = params.get("_meta") or {}
                if "traceparent" in meta:  # a traced call: the context it carried
                    line["trace"] = {
                        k: meta[k] for k in ("traceparent", "tracestate", "baggage") if k in meta
                    }
                f.write(json.dumps(line) + "\n")
        with self.lock:
            known = isinstance(name, str) and name in self.tools
        if not known:
            reply: dict[str, Any] = {"error": {"code": -32602, "message": f"Unknown tool: {name}"}}
        else:
            reply = self.tool_reply(str(name), args, params, cancel)
        with self.lock:
            self.cancel_events.pop(request_id, None)
        if reply and not cancel.is_set():
            send({"jsonrpc": "2.0", "id": request_id, **reply})

    def tool_reply(
        self, name: str, args: dict[str, Any], params: dict[str, Any], cancel: threading.Event
    ) -> dict[str, Any]:
        """The reply fields for a known tool; empty when the call was cancelled."""
        try:
            result = self.run_tool(name, args, params, cancel)
        except Exception as exc:  # a bad argument is the tool's error, not the server's
            return {"result": text_result(f"{name} failed: {exc!r}", is_error=True)}
        return {"result": result} if result is not None else {}

    def run_tool(
        self, name: str, args: dict[str, Any], params: dict[str, Any], cancel: threading.Event
    ) -> dict[str, Any] | None:
        """The result, or None when the call was cancelled (no answer is sent then)."""
        if name == "echo":
            return text_result(str(args["text"]))
        if name == "add":
            total = args["a"] + args["b"]
            return text_result(str(total))
        if name == "sleep":
            return None if cancel.wait(float(args["seconds"])) else text_result("slept")
        if name == "progress":
            token = (params.get("_meta") or {}).get("progressToken")
            steps = int(args.get("steps", 3))
            for step in range(1, steps + 1):
                if cancel.wait(float(args.get("interval", 0.05))):
                    return None
                if token is not None:
                    send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {
                                "progressToken": token,
                                "progress": step,
                                "total": steps,
                                "message": f"step {step} of {steps}",
                            },
                        }
                    )
            return text_result(f"done after {steps} steps")
        if name == "fail":
            return text_result("this tool always fails", is_error=True)
        if name == "image":
            return {
                "content": [
                    {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
                    {"type": "text", "text": "a 1x1 transparent PNG"},
                ]
            }
        if name == "big":
            return text_result("x" * int(args["bytes"]))
        if name == "add_tool":
            new = str(args["name"])
            with self.lock:
                self._add(new, f"Added at run time: {new}.", schema())
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return text_result(f"added {new}")
        if name == "whoami":
            who = {"pid": os.getpid(), "started": STARTED, "initialized": self.initialized.get("at")}
            return text_result(json.dumps({**who, "capabilities": self.initialized.get("capabilities")}))
        if name == "crash":
            log("crashing, as asked")
            os._exit(3)
        if name == "flood":
            return flood(int(args["count"]), str(args["level"]))
        return text_result(f"{name} called with {json.dumps(args, sort_keys=True)}")


def flood(count: int, level: str) -> dict[str, Any]:
    """``count`` log messages at ``level``, written a thousand lines at a time."""
    for first in range(0, count, 1000):
        lines = (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": level, "logger": "flood", "data": f"flood message {n}"},
                },
                separators=(",", ":"),
            ).encode()
            + b"\n"
            for n in range(first, min(first + 1000, count))
        )
        write_raw(b"".join(lines))
    return text_result(f"flooded {count}")


def escape() -> None:
    """Leave a daemon holding our stdin, stdout and stderr behind, and exit."""
    escaped, execed = os.pipe()  # close-on-exec: EOF once the daemon is on its own
    pid = os.fork()
    if pid == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.execvp("sleep", ["sleep", "1000"])
    os.close(execed)
    os.read(escaped, 1)  # out of our session before we die, or our group kill takes it
    log(f"escaped child pid={pid}")
    os._exit(4)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--calls-log")
    parser.add_argument("--methods-log")
    parser.add_argument("--tools-file")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--huge-line", type=int, default=0)
    parser.add_argument("--exit-during-init", action="store_true")
    parser.add_argument("--ignore-stdin-close", action="store_true")
    parser.add_argument("--stop-reading", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--spawn-child", action="store_true")
    parser.add_argument("--stderr-lines", type=int, default=0)
    parser.add_argument("--flaky", type=float, default=0.0)
    parser.add_argument("--escape", action="store_true")
    parser.add_argument("--whoami", action="store_true")
    parser.add_argument("--surface", action="store_true")
    parser.add_argument("--flood", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.spawn_child:
        import subprocess

        # Same process group as us (no new session): a group kill must reach it.
        child = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL)
        log(f"spawned child pid={child.pid}")
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for i in range(args.stderr_lines):
        sys.stderr.write(f"stderr line {i}\n")
    sys.stderr.flush()
    if args.flaky > 0:
        delay = random.uniform(0.5, 1.5) * args.flaky

        def die() -> None:
            log(f"flaky: exiting after {delay:.2f} s")
            os._exit(1)

        timer = threading.Timer(delay, die)
        timer.daemon = True
        timer.start()
    server = Server(args)
    for line in sys.stdin.buffer:
        if line.strip():
            server.handle_line(line)
        if args.stop_reading and server.initialized:
            log("initialized; no longer reading stdin, as asked")
            threading.Event().wait()
    if args.ignore_stdin_close:
        log("stdin closed; staying alive, as asked")
        threading.Event().wait()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
