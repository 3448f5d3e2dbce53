"""Trust decisions: rule globs, risk classification, pins, listings.

All pure: no Trio, no I/O. What a ``pattern`` sees (candidates) and how any/every
combine is in test_trust_patterns.py. Tool names and descriptions in the tables are the ones the
reference servers publish (filesystem, fetch, git, time, github, playwright,
server-everything), so a vocabulary change that misreads a real tool fails here.
"""

from __future__ import annotations

import ast
import fnmatch
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.router import trust
from actors.router.risk import Risk, classify, name_tokens
from actors.router.subjects import candidates_of
from actors.router.trust import (
    Action,
    CompiledRule,
    Decision,
    Rule,
    apply_pin,
    changed_reason,
    compile_rules,
    decide,
    default_action,
    fingerprint,
    listing_description,
    permission_of,
)
from tests.support.paths import REPO


@attrs.frozen
class ConfigRule:
    """Shaped like ``supervisor.settings.model.TrustRule`` (importing ``supervisor``
    here would pull in the whole service; the router only needs the three fields)."""

    permission: str
    pattern: str = "*"
    action: str = "ask"


NO_RISK = Risk()
WRITES = Risk(writes=True, reasons=("name mentions write",))


def rules(*triples: tuple[str, str, str]) -> tuple[CompiledRule, ...]:
    return compile_rules(triples)


def decide_for(
    server: str,
    tool: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    compiled: tuple[CompiledRule, ...] = (),
    trusted: bool = False,
    risk: Risk = NO_RISK,
    keyed: bool = False,
) -> Decision:
    return decide(
        server, tool, arguments or {}, trusted=trusted, risk=risk, rules=compiled, subject_arguments=keyed
    )


# --- permission globs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "permission", "matches"),
    [
        ("mcp:github:*", "mcp:github:create_issue", True),
        ("mcp:github:*", "mcp:github:", True),
        ("mcp:github:*", "mcp:gitlab:create_issue", False),
        ("mcp:github:*", "mcp:GitHub:create_issue", False),  # case-sensitive on every OS
        ("mcp:github:*", "mcp:github-enterprise:x", False),
        ("mcp:*:shell_*", "mcp:box:shell_exec", True),
        ("mcp:*:shell_*", "mcp:a:b:shell_x", True),  # * crosses ':'
        ("mcp:*:shell_*", "mcp:box:run_shell", False),
        ("mcp:*:shell_*", "mcp:box:Shell_exec", False),
        ("mcp:untrusted-*:*", "mcp:untrusted-scraper:fetch", True),
        ("mcp:untrusted-*:*", "mcp:trusted-scraper:fetch", False),
        ("*", "mcp:anything:at_all", True),
        ("*", "", True),
        ("mcp:fs:?ead_file", "mcp:fs:read_file", True),
        ("mcp:fs:[rw]*", "mcp:fs:write_file", True),
        ("mcp:fs:[!rw]*", "mcp:fs:write_file", False),
    ],
)
def test_permission_glob_semantics(glob: str, permission: str, matches: bool) -> None:
    (rule,) = rules((glob, "*", "deny"))
    assert rule.matches(permission, "anything") is matches


def test_star_pattern_matches_any_subject() -> None:
    (rule,) = rules(("*", "*", "allow"))
    for subject in ("", "/etc/passwd", "line\nbreak", "{}", "ünïcode"):
        assert rule.matches("mcp:s:t", subject)


def test_permission_of() -> None:
    assert permission_of("github", "create_issue") == "mcp:github:create_issue"


def test_permission_uses_original_names_not_sanitized_ids() -> None:
    compiled = rules(("mcp:my.server:do it", "*", "deny"), ("mcp:my_server:*", "*", "allow"))
    decision = decide_for("my.server", "do it", compiled=compiled)
    assert decision.action is Action.DENY
    assert decision.rule == 0


def test_seed_watchdog_rules() -> None:
    compiled = rules(
        ("mcp:github:*", "*", "allow"),
        ("mcp:*:shell_*", "*", "ask"),
        ("mcp:untrusted-*:*", "*", "deny"),
    )
    assert decide_for("github", "create_issue", compiled=compiled, risk=WRITES).action is Action.ALLOW
    assert decide_for("github", "shell_run", compiled=compiled).action is Action.ASK
    assert decide_for("untrusted-x", "shell_run", compiled=compiled).action is Action.DENY
    assert decide_for("time", "get_current_time", compiled=compiled).rule is None


# --- last match wins, patterns over subjects -------------------------------------------


def test_last_matching_rule_wins() -> None:
    compiled = rules(("mcp:github:*", "*", "allow"), ("mcp:github:delete_*", "*", "deny"))
    deleted = decide_for("github", "delete_repository", compiled=compiled)
    assert (deleted.action, deleted.rule) == (Action.DENY, 1)
    assert "[1]" in deleted.reason and "mcp:github:delete_*" in deleted.reason
    created = decide_for("github", "create_issue", compiled=compiled, risk=WRITES)
    assert (created.action, created.rule) == (Action.ALLOW, 0)
    reversed_order = rules(("mcp:github:delete_*", "*", "deny"), ("mcp:github:*", "*", "allow"))
    assert decide_for("github", "delete_repository", compiled=reversed_order).action is Action.ALLOW


def test_rule_pattern_over_subject() -> None:
    compiled = compile_rules([{"permission": "mcp:fs:write_file", "pattern": "/tmp/*", "action": "allow"}])
    risk = classify("write_file", "Create a new file or completely overwrite an existing file.", None)

    def action(path: str) -> Action:
        args = {"path": path, "content": "x"}  # write_file's schema declares "path"
        return decide_for("fs", "write_file", args, compiled=compiled, risk=risk, keyed=True).action

    assert action("/tmp/x") is Action.ALLOW
    assert action("/tmp/deep/er/x") is Action.ALLOW  # * crosses '/', as fnmatch does
    assert action("/etc/passwd") is Action.ASK  # no rule: untrusted writer's default
    assert action("/tmp/../etc/passwd") is Action.ASK  # normalized before matching
    assert action("/TMP/x") is Action.ASK


def test_a_rule_for_another_tool_does_not_apply() -> None:
    compiled = rules(("mcp:fs:write_file", "*", "allow"))
    assert decide_for("fs", "edit_file", {"path": "/tmp/x"}, compiled=compiled, risk=WRITES).rule is None


def test_rules_override_trusted_servers_too() -> None:
    compiled = rules(("mcp:fs:*", "/etc/*", "deny"))
    assert decide_for("fs", "read_file", {"path": "/etc/shadow"}, compiled=compiled, trusted=True).action is (
        Action.DENY
    )
    assert decide_for("fs", "read_file", {"path": "/home/a"}, compiled=compiled, trusted=True).action is (
        Action.ALLOW
    )


# --- compile_rules ----------------------------------------------------------------------


def test_compile_rules_accepts_tuples_mappings_and_rule_objects() -> None:
    compiled = compile_rules(
        [
            ("mcp:a:*", "*", "allow"),
            {"permission": "mcp:b:*", "action": "deny"},  # pattern defaults to "*"
            ConfigRule(permission="mcp:c:*", pattern="/tmp/*", action="ask"),
            Rule("mcp:d:*", "*", Action.DENY),
        ]
    )
    assert [c.index for c in compiled] == [0, 1, 2, 3]
    assert [c.rule for c in compiled] == [
        Rule("mcp:a:*", "*", Action.ALLOW),
        Rule("mcp:b:*", "*", Action.DENY),
        Rule("mcp:c:*", "/tmp/*", Action.ASK),
        Rule("mcp:d:*", "*", Action.DENY),
    ]
    assert Action("allow") is Action.ALLOW and str(Action.DENY) == "deny"


@pytest.mark.parametrize("bad", ["permit", "Allow", "ALLOW", "", " allow", None, 1, ["allow"]])
def test_compile_rules_rejects_unknown_action(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"trust rule 1: unknown action .*expected 'allow', 'ask' or 'deny'"):
        compile_rules([("mcp:a:*", "*", "allow"), ("mcp:b:*", "*", bad)])


@given(st.text().filter(lambda s: s not in ("allow", "ask", "deny")))
def test_compile_rules_rejects_any_other_action(action: str) -> None:
    with pytest.raises(ValueError, match="unknown action"):
        compile_rules([("*", "*", action)])


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (("mcp:a:*", "allow"), "expected \\(permission, pattern, action\\)"),
        ({"pattern": "*", "action": "allow"}, "needs 'permission' and 'action'"),
        ((5, "*", "allow"), "permission must be a string glob"),
        (("*", None, "allow"), "pattern must be a string glob"),
        ("mcp:a:*", "not a rule"),
    ],
)
def test_compile_rules_rejects_malformed_rules(item: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"trust rule 0: {message}"):
        compile_rules([item])


# --- classification ---------------------------------------------------------------------

FS_READ = (
    "Read the complete contents of a file from the file system. Handles various text encodings and "
    "provides detailed error messages if the file cannot be read. Use this tool when you need to "
    "examine the contents of a single file. Only works within allowed directories."
)
FETCH = (
    "Fetches a URL from the internet and optionally extracts its contents as markdown.\n\nAlthough "
    "originally you did not have internet access, and were advised to refuse and tell the user this, "
    "this tool now grants you internet access. Now you can fetch the most up-to-date information."
)
PLAYWRIGHT_READ = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": True}
PLAYWRIGHT_WRITE = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True}

# (name, description, annotations, (writes, network, shell))
CLASSIFICATION = [
    # filesystem
    ("read_file", FS_READ, None, (False, False, False)),
    (
        "write_file",
        "Create a new file or completely overwrite an existing file with new content. Use with caution "
        "as it will overwrite existing files without warning.",
        None,
        (True, False, False),
    ),
    (
        "edit_file",
        "Make line-based edits to a text file. Each edit replaces exact line sequences with new content. "
        "Returns a git-style diff showing the changes made.",
        None,
        (True, False, False),
    ),
    (
        "list_directory",
        "Get a detailed listing of all files and directories in a specified path. Results clearly "
        "distinguish between files and directories with [FILE] and [DIR] prefixes.",
        None,
        (False, False, False),
    ),
    (
        "move_file",
        "Move or rename files and directories. Can move files between directories and rename them in a "
        "single operation. If the destination exists, the operation will fail.",
        None,
        (True, False, False),
    ),
    (
        "get_file_info",
        "Retrieve detailed metadata about a file or directory. Returns comprehensive information "
        "including size, creation time, last modified time, permissions, and file type.",
        None,
        (False, False, False),
    ),
    # fetch
    ("fetch", FETCH, None, (False, True, False)),
    # git
    ("git_commit", "Records changes to the repository", None, (True, False, False)),
    ("git_status", "Shows the working tree status", None, (False, False, False)),
    ("git_add", "Adds file contents to the staging area", None, (True, False, False)),
    # time
    ("get_current_time", "Get current time in a specific timezones", None, (False, False, False)),
    ("convert_time", "Convert time between timezones", None, (False, False, False)),
    # github
    ("create_issue", "Create a new issue in a GitHub repository", None, (True, False, False)),
    ("search_issues", "Search for issues in GitHub repositories", None, (False, False, False)),
    (
        "get_file_contents",
        "Get the contents of a file or directory from a GitHub repository",
        None,
        (False, False, False),
    ),
    ("create_pull_request", "Create a new pull request in a GitHub repository", None, (True, False, False)),
    ("get_pull_request", "Get details of a specific pull request", None, (False, False, False)),
    ("get_commit", "Get details for a commit from a GitHub repository", None, (False, False, False)),
    ("get_workflow_run", "Get details of a specific workflow run", None, (False, False, False)),
    # playwright, without and with the annotations it publishes
    ("browser_navigate", "Navigate to a URL", None, (False, True, False)),
    ("browser_navigate", "Navigate to a URL", PLAYWRIGHT_WRITE, (True, True, False)),
    ("browser_snapshot", "Capture accessibility snapshot of the current page", None, (False, True, False)),
    (
        "browser_snapshot",
        "Capture accessibility snapshot of the current page",
        PLAYWRIGHT_READ,
        (False, True, False),
    ),
    ("browser_click", "Perform click on a web page", PLAYWRIGHT_WRITE, (True, True, False)),
    # shell-ish
    ("run_command", "Run a shell command and return its output", None, (False, False, True)),
    ("execute_python", "Execute Python code in a sandbox", None, (False, False, True)),
    ("start_process", "Start a new terminal process", None, (False, False, True)),
    ("process_image", "Resize an image", None, (False, False, False)),
    ("list_processes", "List running processes", None, (False, False, False)),
    # server-everything
    ("echo", "Echoes back the input", None, (False, False, False)),
    ("add", "Adds two numbers", None, (False, False, False)),
    (
        "trigger-long-running-operation",
        "Demonstrates a long running operation with progress updates",
        None,
        (False, False, False),
    ),
    # tokenization and word boundaries
    ("getCurrentTime", "", None, (False, False, False)),
    ("writeFile", "", None, (True, False, False)),
    ("HTTPRequest", "", None, (False, True, False)),
    ("menu", "Returns the shellfish menu; rewritten daily", None, (False, False, False)),
    ("lookup", "Set write_mode to pick a mode", None, (False, False, False)),
    ("lookup", "Sends an email to the user", None, (False, True, False)),
    ("do_it", "Executes the given script", None, (False, False, True)),
]


@pytest.mark.parametrize(("name", "description", "annotations", "expected"), CLASSIFICATION)
def test_classification(
    name: str, description: str, annotations: Mapping[str, Any] | None, expected: tuple[bool, bool, bool]
) -> None:
    risk = classify(name, description, annotations)
    assert (risk.writes, risk.network, risk.shell) == expected, risk.reasons
    assert risk.risky is any(expected)
    assert bool(risk.reasons) is any(expected)


def test_reasons_name_their_source() -> None:
    risk = classify("write_file", "Fetches a URL", {"destructiveHint": True, "openWorldHint": True})
    assert risk.reasons == (
        "name mentions write",
        "annotation destructiveHint",
        "description mentions fetches",
        "description mentions url",
        "annotation openWorldHint",
    )


def test_name_tokens() -> None:
    assert name_tokens("getCurrentTime") == ["get", "current", "time"]
    assert name_tokens("trigger-long-running_operation") == ["trigger", "long", "running", "operation"]
    assert name_tokens("HTTPRequest2") == ["http", "request", "2"]
    assert name_tokens("fs.write/x") == ["fs", "write", "x"]


def test_read_only_hint_never_clears_a_risk() -> None:
    description = "Create a new file or completely overwrite an existing file."
    hints = {"readOnlyHint": True}
    risk = classify("write_file", description, hints)
    assert risk.writes
    assert "annotation readOnlyHint ignored (hints never clear a risk)" in risk.reasons
    assert default_action(False, risk) is Action.ASK
    assert decide_for("fs", "write_file", {"path": "/x"}, risk=risk).action is Action.ASK
    # Nor does any other hint say "safe": destructiveHint false, openWorldHint false.
    quiet = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
    assert classify("fetch", FETCH, quiet).network
    assert classify("run_command", "", quiet).shell
    # Contradictory hints take the union.
    assert classify("tool", "", {"readOnlyHint": True, "destructiveHint": True}).writes


def test_read_only_hint_alone_neither_grants_nor_adds() -> None:
    risk = classify("get_current_time", "Get current time", {"readOnlyHint": True})
    assert risk == NO_RISK
    assert classify("get_current_time", "", {"readOnlyHint": False}).writes  # believed when it warns


def test_only_real_booleans_count_as_hints() -> None:
    assert classify("tool", "", {"destructiveHint": "true", "openWorldHint": 1}) == NO_RISK
    assert classify("tool", "", None) == NO_RISK
    assert classify("tool", "", {}) == NO_RISK


# --- defaults -------------------------------------------------------------------------


def test_default_action() -> None:
    shell = Risk(shell=True, reasons=("name mentions exec",))
    assert default_action(True, shell) is Action.ALLOW
    assert default_action(True, NO_RISK) is Action.ALLOW
    assert default_action(False, shell) is Action.ASK
    assert default_action(False, NO_RISK) is Action.ALLOW


def test_default_decision_reasons() -> None:
    risk = classify("run_command", "Run a shell command", None)
    asked = decide_for("box", "run_command", {"command": "ls"}, risk=risk)
    assert (asked.action, asked.rule) == (Action.ASK, None)
    assert "untrusted" in asked.reason and "run commands" in asked.reason
    assert "name mentions command" in asked.reason
    trusted = decide_for("box", "run_command", {"command": "ls"}, risk=risk, trusted=True)
    assert (trusted.action, trusted.rule) == (Action.ALLOW, None)
    assert "trusted" in trusted.reason
    harmless = decide_for("time", "get_current_time", risk=NO_RISK)
    assert harmless.action is Action.ALLOW and "no write, network or shell risk" in harmless.reason


# --- pins -----------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def test_fingerprint_is_canonical_sha256() -> None:
    pin = fingerprint("Read a file", SCHEMA)
    assert len(pin) == 64 and int(pin, 16) >= 0
    reordered = {"required": ["path"], "properties": {"path": {"type": "string"}}, "type": "object"}
    assert fingerprint("Read a file", reordered) == pin
    assert fingerprint("Read a file", MappingProxyType(SCHEMA)) == pin
    assert fingerprint("Read a file.", SCHEMA) != pin
    assert fingerprint("Read a file", {**SCHEMA, "required": []}) != pin
    assert fingerprint("\ud800 odd", SCHEMA) == fingerprint("\ud800 odd", SCHEMA)  # lone surrogate ok


def test_a_moved_pin_makes_an_allow_an_ask_that_says_what_changed() -> None:
    allowed = Decision(Action.ALLOW, "trust rule [0] ...", 0)
    old = fingerprint("Read a file", SCHEMA)
    new = fingerprint("Read a file; also send it to evil.example", SCHEMA)
    assert apply_pin(allowed, new, old, "description") == Decision(Action.ASK, "changed: description", None)
    assert changed_reason("input schema") == "changed: input schema"
    assert apply_pin(allowed, old, old, "description") is allowed
    assert apply_pin(allowed, new, None, "description") is allowed
    denied = Decision(Action.DENY, "y", 3)
    assert apply_pin(denied, new, old, "description") is denied


def test_a_moved_pin_puts_what_changed_first_in_an_ask() -> None:
    asked = Decision(Action.ASK, "default for an untrusted server: ask (tool may write: x)", None)
    assert apply_pin(asked, "new", "old", "description and input schema") == Decision(
        Action.ASK,
        "changed: description and input schema; default for an untrusted server: ask (tool may write: x)",
        None,
    )
    assert apply_pin(asked, "same", "same", "description") is asked


# --- listing descriptions ---------------------------------------------------------------


def test_listing_description() -> None:
    long = "word " * 100
    cut = listing_description(long, trusted=False)
    assert len(cut) <= 200 and cut.endswith("…") and long.startswith(cut[:-1])
    assert listing_description(long, trusted=True) == long
    assert listing_description("short", trusted=False) == "short"
    exact = "x" * 200
    assert listing_description(exact, trusted=False) == exact
    assert listing_description("abc", trusted=False, max_length=1) == "…"
    assert listing_description("abc", trusted=False, max_length=0) == ""


@given(st.text(), st.integers(min_value=0, max_value=300))
def test_listing_description_never_exceeds_the_bound(description: str, max_length: int) -> None:
    cut = listing_description(description, trusted=False, max_length=max_length)
    assert len(cut) <= max_length
    if cut != description:
        assert (cut == "" and max_length == 0) or (cut.endswith("…") and description.startswith(cut[:-1]))
    assert listing_description(description, trusted=True, max_length=max_length) == description


# --- robustness -------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)
ARGUMENTS = st.dictionaries(
    st.sampled_from(["path", "url", "command", "args", "query", "name"]) | st.text(), JSON, max_size=6
)
COMPILED = compile_rules(
    [
        ("*", "*", "ask"),
        ("mcp:*:*write*", "/tmp/*", "allow"),
        ("mcp:[a-m]*:*", "*[!x]", "deny"),
        ("mcp:*:shell_*", "*rm -rf*", "deny"),
    ]
)


@given(st.text(), st.text(), ARGUMENTS, st.booleans(), st.text(), JSON)
def test_decide_never_raises(
    server: str, tool: str, arguments: dict[str, Any], trusted: bool, description: str, annotations: Any
) -> None:
    risk = classify(tool, description, annotations if isinstance(annotations, dict) else None)
    for compiled in (COMPILED, ()):
        decision = decide(server, tool, arguments, trusted=trusted, risk=risk, rules=compiled)
        assert isinstance(decision.action, Action) and decision.reason
        assert decision.rule is None or 0 <= decision.rule < len(compiled)
    for keyed in (True, False):
        found = candidates_of(arguments, subject_arguments=keyed)
        assert found == candidates_of(dict(reversed(list(arguments.items()))), subject_arguments=keyed)


@given(st.text(), JSON)
def test_classify_and_fingerprint_never_raise(text: str, value: Any) -> None:
    classify(text, text, value)  # servers send anything as annotations
    assert len(fingerprint(text, {"x": value})) == 64


def test_non_string_arguments_are_no_candidates() -> None:
    arguments = {"x": math.nan, "n": 1, "b": True, "z": None, "l": [1.5, {"k": -1}]}
    assert candidates_of(arguments, subject_arguments=False) == ()
    assert candidates_of(arguments, subject_arguments=True) == ()


@pytest.mark.parametrize(
    "module", ["router/trust.py", "router/risk.py", "router/subjects.py", "tool_definitions.py"]
)
def test_module_is_pure(module: str) -> None:
    source = REPO / "actors" / module
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"trio", "anyio", "asyncio", "socket", "subprocess", "os", "supervisor"}


def test_arguments_nested_beyond_the_recursion_limit_do_not_raise() -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    assert decide_for("s", "t", deep, compiled=COMPILED).action is Action.ASK  # rule 0 still matches "*"
    assert len(fingerprint("d", deep)) == 64


@given(st.text(), st.text(), st.text(), st.text())
def test_any_string_compiles_and_matches_like_fnmatchcase(
    permission_glob: str, pattern_glob: str, permission: str, subject: str
) -> None:
    (rule,) = compile_rules([(permission_glob, pattern_glob, "deny")])
    expected = fnmatch.fnmatchcase(permission, permission_glob) and fnmatch.fnmatchcase(subject, pattern_glob)
    assert rule.matches(permission, subject) is expected


def test_candidates_are_computed_only_when_a_rule_could_use_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # The allow path of a call with no applicable rule, or with only "*" patterns, must not
    # walk the arguments.
    seen: list[Mapping[str, Any]] = []
    real = candidates_of

    def counting(arguments: Mapping[str, Any], *, subject_arguments: bool) -> Any:
        seen.append(arguments)
        return real(arguments, subject_arguments=subject_arguments)

    monkeypatch.setattr(trust, "candidates_of", counting)
    arguments = {"path": "/tmp/a"}
    assert decide("fs", "read", arguments, trusted=True, risk=Risk(), rules=()).action is Action.ALLOW
    other_rules = [("mcp:git:*", "*", "deny"), ("mcp:web:*", "*", "deny")]
    others = compile_rules(other_rules)
    assert decide("fs", "read", arguments, trusted=True, risk=Risk(), rules=others).rule is None
    star = compile_rules([("mcp:fs:*", "/etc/*", "deny"), ("mcp:fs:*", "*", "ask")])
    assert decide("fs", "read", arguments, trusted=True, risk=Risk(), rules=star).rule == 1
    assert seen == []
    mine = compile_rules([("mcp:fs:*", "/tmp/*", "deny"), ("mcp:fs:*", "/etc/*", "allow"), *other_rules])
    decision = decide("fs", "read", arguments, trusted=True, risk=Risk(), rules=mine)
    assert (decision.action, decision.rule) == (Action.DENY, 0)
    assert seen == [arguments]  # once, however many rules read them
