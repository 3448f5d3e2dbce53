"""The ``exposure`` and ``limits`` sections (and a server's ``expose``): what they read
into, and every bad entry a located ``config error`` that says what to write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.router.exposure import Lists, ServerRule
from supervisor.settings.model import ExposureRule, RateLimit
from tests.settings.test_config_loader import fail, load

SERVERS: dict[str, Any] = {"github": {"command": "gh-mcp"}, "fs": {"command": "fs-mcp"}}


def test_nothing_is_hidden_or_limited_without_the_sections(tmp_path: Path) -> None:
    config = load(tmp_path, {"servers": SERVERS})
    assert config.exposure == () and config.limits == ()


def test_entries_and_a_servers_expose_read_into_rules(tmp_path: Path) -> None:
    doc = {
        "servers": {
            **SERVERS,
            "fs": {"command": "fs-mcp", "expose": {"resources": {"deny": ["file:///etc/*"]}}},
        },
        "exposure": [
            {"tenant": "contractors", "server": "git*", "tools": {"allow": ["get_*", "search_*"]}},
            {"prompts": {"deny": ["admin_*"]}, "tools": {"allow": [], "deny": ["x"]}},
        ],
    }
    assert load(tmp_path, doc).exposure == (
        ExposureRule("contractors", ServerRule("git*", tools=Lists(allow=("get_*", "search_*")))),
        ExposureRule(
            "*", ServerRule("*", tools=Lists(allow=(), deny=("x",)), prompts=Lists(deny=("admin_*",)))
        ),
        ExposureRule("*", ServerRule("fs", resources=Lists(deny=("file:///etc/*",)))),
    )


def test_limits_read_with_the_fields_they_name(tmp_path: Path) -> None:
    doc = {
        "servers": SERVERS,
        "limits": [
            {"tenant": "*", "per_s": 50, "burst": 20},
            {"server": "github", "tool": "search_*", "per_s": 0.5, "burst": 1},
            {"per_s": 1000, "burst": 100},
        ],
    }
    assert load(tmp_path, doc).limits == (
        RateLimit(50.0, 20, tenant="*"),
        RateLimit(0.5, 1, server="github", tool="search_*"),
        RateLimit(1000.0, 100),
    )


ENTRY = '{"tenant": "alice", "server": "github", "tools": {"deny": ["delete_*"]}}'
KIND = '{"allow": ["read_*"], "deny": ["*_admin"]}'


@pytest.mark.parametrize(
    ("doc", "where", "problem"),
    [
        ({"exposure": {}}, "$.exposure", f"expected a list of entries like {ENTRY}, got {{}}"),
        ({"exposure": ["x"]}, "$.exposure[0]", f'expected an entry like {ENTRY}, got "x"'),
        (
            {"exposure": [{"tenant": "a"}]},
            "$.exposure[0]",
            "names no tools, resources or prompts, so it hides",
        ),
        ({"exposure": [{"tool": {}}]}, "$.exposure[0]", "unknown key 'tool' (did you mean 'tools'?)"),
        (
            {"exposure": [{"tenant": "", "tools": {"deny": ["x"]}}]},
            "$.exposure[0].tenant",
            'expected a tenant name or glob (a non-empty string), got ""',
        ),
        (
            {"exposure": [{"server": "githb", "tools": {"deny": ["x"]}}]},
            "$.exposure[0].server",
            "no server named 'githb' in the config (configured: github, fs); name one of them, "
            'or write a glob such as "git*"',
        ),
        ({"exposure": [{"tools": ["x"]}]}, "$.exposure[0].tools", f'expected {KIND}, got ["x"]'),
        ({"exposure": [{"tools": {}}]}, "$.exposure[0].tools", "give allow or deny (or both)"),
        (
            {"exposure": [{"tools": {"alow": []}}]},
            "$.exposure[0].tools",
            "unknown key 'alow' (did you mean 'allow'?)",
        ),
        (
            {"exposure": [{"resources": {"allow": "read_*"}}]},
            "$.exposure[0].resources.allow",
            'expected a list of globs like ["read_*"], got "read_*"',
        ),
        (
            {"exposure": [{"prompts": {"deny": ["ok", 42]}}]},
            "$.exposure[0].prompts.deny[1]",
            'expected a glob such as "read_*" (a non-empty string), got 42',
        ),
        (
            {"servers": {"fs": {"command": "x", "expose": {"tool": {}}}}},
            "$.servers.fs.expose",
            "unknown key 'tool' (did you mean 'tools'?)",
        ),
        ({"limits": [{"per_s": 5}]}, "$.limits[0]", "the limit has no 'burst'; every limit needs per_s"),
        ({"limits": [{"per_s": 0, "burst": 1}]}, "$.limits[0].per_s", "expected a number greater than 0"),
        ({"limits": [{"per_s": 1, "burst": 0.5}]}, "$.limits[0].burst", "expected a whole number, got 0.5"),
        ({"limits": [{"per_s": 1, "burst": 1, "tools": "x"}]}, "$.limits[0]", "unknown key 'tools'"),
        (
            {"limits": [{"per_s": 1, "burst": 1, "server": "nope"}]},
            "$.limits[0].server",
            "no server named 'nope' in the config",
        ),
        (
            {"limits": [{"tenant": "*", "per_s": 1, "burst": 1}, {"tenant": "*", "per_s": 9, "burst": 9}]},
            "$.limits[1]",
            "covers the same calls as $.limits[0] (the same tenant, server and tool), so the two would "
            "share their buckets; keep one",
        ),
    ],
)
def test_a_bad_entry_is_a_config_error_naming_it(
    tmp_path: Path, doc: dict[str, Any], where: str, problem: str
) -> None:
    error = fail(tmp_path, {"servers": SERVERS, **doc})
    assert error.json_path == where
    assert error.problem.startswith(problem), error.problem
