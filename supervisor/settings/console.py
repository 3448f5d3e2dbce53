"""The ``console`` section: what the operator's console at ``/ui`` links to.

``trace_url`` is where a trace backend (Jaeger, Tempo, Honeycomb…) shows one trace: a
URL template with ``{trace_id}`` in it, into which an audit row's trace id goes
(URL-quoted). Absent, the console's audit page shows trace ids as text. Checked here,
so a template the console could not fill in, or a link a browser would run as script
(``javascript:``), never reaches a page.

``allowed_origins``: browser origins (``https://console.example``) whose requests the
console accepts besides its own, for a proxy that does not pass the browser's host on
(nginx's ``$host`` drops a non-default port): every state-changing ``/ui`` request
must come from the page's own origin or one of these.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import attrs

from .expansion import Expander
from .origins import read_origins
from .values import Invalid, check_keys, child, expect_object, show

PLACEHOLDER = "{trace_id}"
EXAMPLE = '"http://127.0.0.1:16686/trace/{trace_id}"'


@attrs.frozen(slots=True)
class ConsoleSettings:
    """The console's settings (``trace_url``: None, no trace links)."""

    trace_url: str | None = None
    allowed_origins: tuple[str, ...] = ()

    def trace_link(self, trace_id: str | None) -> str | None:
        """The link to the trace ``trace_id`` (None: no template, or no trace)."""
        if self.trace_url is None or not trace_id:
            return None
        return self.trace_url.replace(PLACEHOLDER, quote(trace_id, safe=""))


def read_console(value: object, path: str, exp: Expander) -> ConsoleSettings:
    """The console settings at ``path``; ``trace_url`` an http(s) URL template naming
    ``{trace_id}``, or absent or null."""
    obj = expect_object(value, path, 'an object like {"trace_url": ' + EXAMPLE + "}")
    check_keys(obj, path, ("trace_url", "allowed_origins"))
    origins = read_origins(obj.get("allowed_origins", []), child(path, "allowed_origins"))
    if obj.get("trace_url") is None:
        return ConsoleSettings(allowed_origins=origins)
    at = child(path, "trace_url")
    url = exp.text(obj["trace_url"], at, f"a URL template, like {EXAMPLE}")
    fix = f"write it like {EXAMPLE}, or remove 'trace_url' to show trace ids as text"
    try:
        parts = urlsplit(url)
    except ValueError:
        raise Invalid(at, f"not a URL (a bad port or bracket); {fix}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Invalid(at, f"expected an http:// or https:// URL, got {show(obj['trace_url'])}; {fix}")
    if PLACEHOLDER not in url:
        raise Invalid(at, f"has no {PLACEHOLDER} for the trace id to go into; {fix}")
    return ConsoleSettings(trace_url=url, allowed_origins=origins)
