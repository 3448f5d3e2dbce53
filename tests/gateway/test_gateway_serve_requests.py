"""``mcp-supervisor serve``'s ``/mcp`` passes a backend's requests on: the shared
servers are told the client can sample, elicit and list roots (``PASSED_ON``), and a
request goes to the stream of the client call that caused it, or is refused when that
client did not declare the capability. A real ``serve`` process fronting the
conformance fixture in the handshake era (where servers send requests of their own)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.cli.test_serve_status import spawn_serve
from tests.support.paths import SERVERS

FIXTURE = str(SERVERS / "everything_server.py")
PROTOCOL = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    """``serve`` fronting the fixture over stdio (handshake era); yields ``/mcp``'s URL."""
    config = tmp_path / "config.json"
    server = {"command": [sys.executable, FIXTURE], "trusted": True, "protocol": PROTOCOL}
    config.write_text(
        json.dumps(
            {
                "servers": {"everything": server},
                "gateway": {"prefix": False},
                "tool_search": {"enabled": False},
            }
        )
    )
    serve, url = spawn_serve(config, tmp_path / "state")
    try:
        yield f"{url}/mcp"
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=20)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


def session(client: httpx2.Client, url: str, capabilities: Mapping[str, Any]) -> dict[str, str]:
    """Initialize a session; the headers of its later requests."""
    params = {
        "protocolVersion": PROTOCOL,
        "capabilities": dict(capabilities),
        "clientInfo": {"name": "t", "version": "1"},
    }
    reply = client.post(
        url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    )
    assert reply.status_code == 200, reply.text
    headers = {**ACCEPT, "Mcp-Session-Id": reply.headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL}
    note = client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    return headers


def call(
    client: httpx2.Client, url: str, headers: Mapping[str, str], tool: str, arguments: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Call a tool, answering its server requests from its own stream as a client
    would; what came on the stream before the response, and the response."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": dict(arguments)},
    }
    related: list[dict[str, Any]] = []
    with client.stream("POST", url, headers=headers, json=body) as stream:
        if stream.headers["content-type"] == "application/json":  # answered within the window
            return related, json.loads(stream.read())
        for line in stream.iter_lines():
            if not line.startswith("data:") or not line[5:].strip():
                continue
            message = json.loads(line[5:])
            if message.get("id") == 1 and "method" not in message:
                return related, message
            related.append(message)
            if message.get("method") == "sampling/createMessage":
                answer = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
                client.post(
                    url, headers=headers, json={"jsonrpc": "2.0", "id": message["id"], "result": answer}
                )
    raise AssertionError(f"the stream ended before the response; saw {related}")


def text_of(response: Mapping[str, Any]) -> str:
    return str(response["result"]["content"][0]["text"])


def test_the_backend_is_told_the_client_can_sample(gateway: str) -> None:
    with httpx2.Client(timeout=20) as client:
        headers = session(client, gateway, {"sampling": {}})
        _, response = call(client, gateway, headers, "test_missing_capability", {})
    assert response["result"].get("isError") is not True, response
    assert text_of(response) == "The client declared sampling; its model said: hi"


def test_a_backend_sampling_request_goes_to_the_stream_of_the_call_that_caused_it(gateway: str) -> None:
    with httpx2.Client(timeout=20) as client:
        headers = session(client, gateway, {"sampling": {}})
        related, response = call(client, gateway, headers, "test_sampling", {"prompt": "hello"})
    (asked,) = [m for m in related if m.get("method") == "sampling/createMessage"]
    assert asked["params"]["messages"][0]["content"]["text"] == "hello"
    assert text_of(response) == "LLM response: hi"


def test_a_client_that_did_not_declare_sampling_is_not_asked(gateway: str) -> None:
    with httpx2.Client(timeout=20) as client:
        headers = session(client, gateway, {})
        related, response = call(client, gateway, headers, "test_sampling", {"prompt": "hello"})
    assert not [m for m in related if "method" in m and "id" in m], related
    assert response["result"]["isError"] is True
    assert "sampling/createMessage" in text_of(response), response
