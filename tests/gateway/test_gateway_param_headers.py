"""``/mcp`` checks a 2026-07-28 ``tools/call``'s ``Mcp-Param-*`` headers against the
arguments of the tool's ``x-mcp-header`` parameters (SEP-2243): a missing header, a
mismatch, a header without its argument and bad Base64 are refused with 400 and -32020,
naming the header; ``=?base64?…?=`` is decoded, anything else is literal. The rules
(pure) and a real ``/mcp`` fronting the conformance fixture's ``test_x_mcp_header``."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.protocol.param_headers import header_mismatch, received_value
from actors.spec import ServerSpec, Start
from supervisor.gateway.http_rules import HEADER_MISMATCH
from supervisor.settings.model import ToolSearchSettings
from tests.gateway.test_gateway_stateless import VERSION, request
from tests.support.admin import admin_running, config_of
from tests.support.paths import SERVERS

FIXTURE = str(SERVERS / "everything_server.py")
REGION = {("region",): "Region"}
HELLO = f"=?base64?{base64.b64encode(b'Hello').decode()}?="


def test_a_value_is_decoded_only_in_its_base64_form_and_strictly() -> None:
    assert received_value(HELLO) == "Hello" and received_value("  Hello\t") == "Hello"
    assert (
        received_value("SGVsbG8=") == "SGVsbG8="
        and received_value("=?base64?SGVsbG8=") == "=?base64?SGVsbG8="
    )
    for bad in (
        "=?base64?SGVsbG8?=",
        "=?base64?SGVs!!!bG8=?=",
        "=?base64?/w==?=",
    ):  # padding, alphabet, UTF-8
        with pytest.raises(ValueError, match="not valid Base64"):
            received_value(bad)


@pytest.mark.parametrize(
    ("arguments", "received", "problem"),
    [
        ({"region": "Hello"}, {"mcp-param-region": HELLO}, None),
        ({"region": "eu"}, {"mcp-param-region": "eu"}, None),
        ({}, {}, None),
        (
            {"region": "eu"},
            {},
            "the Mcp-Param-Region header is missing, but argument 'region' is in the body",
        ),
        ({"region": "eu"}, {"mcp-param-region": "us"}, "the Mcp-Param-Region header ('us') does not match"),
        ({}, {"mcp-param-region": "eu"}, "the Mcp-Param-Region header is sent, but argument 'region' is not"),
        (
            {"region": "Hello"},
            {"mcp-param-region": "=?base64?SGVsbG8?="},
            "the Mcp-Param-Region header is malformed",
        ),
    ],
)
def test_headers_must_repeat_the_designated_arguments(
    arguments: dict[str, Any], received: dict[str, str], problem: str | None
) -> None:
    found = header_mismatch(REGION, arguments, received)
    if problem is None:
        assert found is None, found
    else:
        assert found is not None and found.startswith(problem), found


async def test_mcp_refuses_a_call_whose_param_headers_do_not_repeat_the_body(tmp_path: Path) -> None:
    spec = ServerSpec(name="fx", command=(sys.executable, FIXTURE), trusted=True, start=Start.EAGER)
    tool = "fx_test_x_mcp_header"
    base = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
    headers = {**base, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    async with admin_running(
        attrs.evolve(config_of(spec), tool_search=ToolSearchSettings(enabled=False)), tmp_path
    ) as api:
        http = api.http()
        with trio.fail_after(20):

            async def call(region: str, **extra: str) -> Any:
                body = request(3, "tools/call", {"name": tool, "arguments": {"region": region}})
                return await http.request("POST", "/mcp", json=body, headers={**headers, **extra})

            missing = await call("eu")
            assert missing.status == 400, missing
            assert missing.json()["error"]["code"] == HEADER_MISMATCH and missing.json()["id"] == 3
            assert "Mcp-Param-Region header is missing" in missing.json()["error"]["message"]
            bad = await call("Hello", **{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="})
            assert (
                bad.status == 400 and "Mcp-Param-Region header is malformed" in bad.json()["error"]["message"]
            )
            other = await call("eu", **{"mcp-param-region": "us"})
            assert other.status == 400 and "does not match" in other.json()["error"]["message"]
            encoded = await call("Hello", **{"Mcp-Param-Region": HELLO})
            assert encoded.status == 200, encoded
            assert encoded.json()["result"]["content"][0]["text"] == "region=Hello", encoded.json()
