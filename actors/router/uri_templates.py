"""Whether a URI could come from a resource template (RFC 6570), by shape.

A host may read a URI that no server lists but that one server's template describes
(``demo://resource/dynamic/text/{id}`` → ``demo://resource/dynamic/text/7``); the
router sends it to that server. Matching covers RFC 6570 levels 1 to 3 by the shape of
each expression, not by its variables' values:

- ``{var}``, ``{x,y}`` (simple): characters other than ``/ ? #``;
- ``{+var}`` (reserved): anything; ``{#var}``: ``#`` then anything, or nothing;
- ``{.var}``, ``{/var}``, ``{;var}``: zero or more ``.``/``/``/``;`` segments;
- ``{?var}``, ``{&var}``: a query part (``?``/``&`` up to ``#``), or nothing.

Values are not decoded or checked against their variables' names, and level 4
modifiers (``{var:3}``, ``{list*}``) match like their plain forms. A template that
is not well formed (an unclosed ``{``) matches only itself, literally.
"""

from __future__ import annotations

import functools
import re

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_OPERATOR_PATTERNS = {
    "": r"[^/?#]*",
    "+": r".*",
    "#": r"(?:#.*)?",
    ".": r"(?:\.[^/?#.]*)*",
    "/": r"(?:/[^/?#]*)*",
    ";": r"(?:;[^/?#]*)*",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)?",
}


@functools.lru_cache(maxsize=1024)
def _compiled(template: str) -> re.Pattern[str]:
    if template.count("{") != template.count("}") or "{" not in template:
        return re.compile(re.escape(template))
    parts: list[str] = []
    position = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[position : match.start()]))
        body = match.group(1)
        operator = body[0] if body and body[0] in "+#./;?&" else ""
        parts.append(_OPERATOR_PATTERNS[operator])
        position = match.end()
    parts.append(re.escape(template[position:]))
    return re.compile("".join(parts), re.DOTALL)


def matches(template: str, uri: str) -> bool:
    """Whether ``uri`` has the shape ``template`` describes (see the module docstring)."""
    return _compiled(template).fullmatch(uri) is not None
