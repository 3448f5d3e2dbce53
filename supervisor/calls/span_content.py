"""What a traced call's span shows besides its metadata, when the config opts in.

The config's ``tracing`` section (``TracingSettings``) is off by default: arguments and
results are what a model sent and got (secrets, personal data), and a tenant names a
customer, while a trace backend is often read more widely than the audit. Opted in,
they go on the call's span (ours, ``mcp_supervisor tools/call <tool id>``) under the
names of OpenTelemetry's GenAI conventions, ``gen_ai.tool.call.arguments`` and
``gen_ai.tool.call.result`` (JSON text: the arguments as the caller gave them, the
envelope as the caller got it), and as ``mcp_supervisor.tenant`` and
``mcp_supervisor.session``, ``mcp_supervisor.person``.

Content is masked exactly as a log line is (``actors.log_events.redact``: every secret
the config expanded, and credential-shaped text), each string before it is quoted, as
JSON escaping would hide a secret holding a quote or a backslash, then the text as a
whole; then it is cut, as the call's own text is, to its server's ``max_output_bytes``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from actors.log_events import redact
from actors.router.catalog import Catalog
from actors.router.depth import MAX_ARGUMENT_DEPTH, nested_deeper_than
from actors.router.envelope import Envelope, truncate_utf8
from actors.spec import DEFAULT_MAX_OUTPUT_BYTES
from supervisor.calls.services import TurnSession
from supervisor.runtime.tracing import SupervisorTracing
from supervisor.settings.model import TracingSettings

ARGUMENTS = "gen_ai.tool.call.arguments"
RESULT = "gen_ai.tool.call.result"
TENANT = "mcp_supervisor.tenant"
SESSION = "mcp_supervisor.session"
PERSON = "mcp_supervisor.person"
TOO_DEEP = f"<nested deeper than {MAX_ARGUMENT_DEPTH} levels: not shown>"


def show_call(
    tracing: SupervisorTracing,
    shown: TracingSettings,
    session: TurnSession,
    catalog: Catalog,
    tool_id: str,
    arguments: Any,
) -> int:
    """Put on the call's span what ``shown`` opts in to of its start (who calls, the
    arguments); returns the bound its content is cut to (its server's, else the default)."""
    if not (shown.arguments or shown.results or shown.identity):
        return DEFAULT_MAX_OUTPUT_BYTES  # the default config: nothing to look up
    entry = catalog.tools.get(tool_id)
    view = None if entry is None else catalog.servers.get(entry.server)
    limit = DEFAULT_MAX_OUTPUT_BYTES if view is None else view.spec.max_output_bytes
    attributes: dict[str, str] = {}
    if shown.identity:
        attributes[TENANT], attributes[SESSION] = session.tenant, session.id
        attributes[PERSON] = session.person
    if shown.arguments:
        attributes[ARGUMENTS] = span_text({} if arguments is None else arguments, limit)
    if attributes:
        tracing.annotate(attributes)
    return limit


def show_result(tracing: SupervisorTracing, envelope: Envelope, limit: int) -> None:
    """Put the call's envelope, as the caller got it, on its span."""
    tracing.annotate({RESULT: span_text(envelope.as_dict(), limit)})


def span_text(value: Any, limit: int) -> str:
    """``value`` as JSON text, masked as a log line is, cut to ``limit`` bytes (UTF-8)."""
    if nested_deeper_than(value, MAX_ARGUMENT_DEPTH):  # refused by the call too: never walked
        return TOO_DEEP
    masked = _masked(value)
    try:
        text = orjson.dumps(masked).decode()
    except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits
        text = json.dumps(masked)
    return truncate_utf8(redact(text), limit)[0]


def _masked(value: Any) -> Any:
    """``value`` with every string (keys too) masked before JSON quotes it; what is not
    JSON becomes its masked ``str``. Only for values no deeper than the call's limit."""
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {redact(str(key)): _masked(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(item) for item in value]
    return redact(str(value))
