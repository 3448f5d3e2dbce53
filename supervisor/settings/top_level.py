"""The top level of a config file: our sections, other hosts' settings, and the rest.

The loader reads the files users already have (``dialects.py``), and those carry their
host's own settings next to the servers: Claude Desktop's ``globalShortcut``, VS
Code's ``inputs``, opencode's ``model`` and ``theme``. Those are known, and ignored
without a word, in the dialect whose files carry them. A key that is close to one of
ours is a typo that would drop a setting: an error, with the key it was probably meant
to be. Anything else (a key of a newer version, a setting of some other program) is
ignored too, but the operator is told: a config warning names it, with the nearest
known key when one is near.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from .dialects import SERVER_SECTIONS
from .values import Invalid, child, suggest

__all__ = ["HOST_KEYS", "OUR_KEYS", "top_level_warnings"]

OUR_KEYS: tuple[str, ...] = (*SERVER_SECTIONS, "tool_search", "trust", "admin", "gateway", "bridge")
OUR_KEYS += ("tracing", "exposure", "limits", "state_dir", "secrets_at_rest", "audit", "signin", "store")
OUR_KEYS += ("cluster", "console")

ANY_FILE = ("$schema",)
"""Keys any JSON file may carry (an editor's schema pointer)."""

HOST_KEYS: Mapping[str, tuple[str, ...]] = {
    # VS Code's .vscode/mcp.json: the input variables its ${input:…} references prompt for.
    "servers": ("inputs",),
    # Claude Desktop's claude_desktop_config.json (Claude Code's .mcp.json, Cursor's and
    # Windsurf's mcp.json hold only the server map).
    "mcpServers": ("globalShortcut", "preferences", "isUsingBuiltInNodeForMcp", "isDxtAutoUpdatesEnabled"),
    # opencode's opencode.json: the agent's own settings around its "mcp" map.
    "mcp": (
        "agent", "autoshare", "autoupdate", "command", "compaction", "default_agent",
        "disabled_providers", "enabled_providers", "enterprise", "experimental", "formatter",
        "instructions", "keybinds", "layout", "lsp", "mode", "model", "permission", "plugin",
        "provider", "server", "share", "small_model", "snapshot", "theme", "tools", "tui",
        "username", "watcher",
    ),
}  # fmt: skip
"""The settings other hosts keep in their files, by the server map that marks the file."""

_NEAR = 0.6
"""How alike a key must be to a known one for the warning to name it (``suggest``'s
bound: a key that near one of ours is an error, so the warning names a host's key)."""


def top_level_warnings(root: Mapping[str, object], section: str | None) -> list[tuple[str, str]]:
    """(json path, problem) for each top-level key that is neither ours nor a setting of
    the host whose file this is (``section``: its server map); raises ``Invalid`` for a
    key that looks like a typo of one of ours."""
    known = (*OUR_KEYS, *ANY_FILE, *HOST_KEYS.get(section or "", ()))
    found = []
    for key in root:
        if key in known:
            continue
        guess = suggest(key, OUR_KEYS)
        if guess is not None:
            raise Invalid("$", f"unknown key {key!r} (did you mean {guess!r}?)")
        found.append((child("$", key), _ignored(key, known)))
    return found


def _ignored(key: str, known: tuple[str, ...]) -> str:
    near = difflib.get_close_matches(key, known, n=1, cutoff=_NEAR)
    hint = (
        f"the nearest known key is {near[0]!r}"
        if near
        else f"the known keys are {', '.join(sorted(OUR_KEYS))}"
    )
    return (
        f"unknown key {key!r}, ignored: it is no setting of this version of mcp-supervisor "
        f"({hint}); correct its name, or remove it"
    )
