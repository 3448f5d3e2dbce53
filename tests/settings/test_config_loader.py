"""The config loader: dialects, defaults, expansion, secrets, and every error's text."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from actors.spec import Scope, ServerSpec, Start
from supervisor.settings.loader import ConfigError, describe_config, load_config
from supervisor.settings.model import Config, Role, TokenGrant, TrustRule
from tests.support.paths import REPO

EXAMPLES = REPO / "config" / "examples"


def write(tmp_path: Path, doc: object, name: str = "config.json") -> Path:
    """Write ``doc`` as JSON (or verbatim when it is already a str)."""
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def load(tmp_path: Path, doc: object, environ: dict[str, str] | None = None) -> Config:
    return load_config(write(tmp_path, doc), environ=environ or {})


def fail(tmp_path: Path, doc: object, environ: dict[str, str] | None = None) -> ConfigError:
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ or {})
    error = caught.value
    assert str(error) == f"config error: {path}: {error.json_path}: {error.problem}"
    assert error.file == str(path)
    return error


def one(tmp_path: Path, entry: dict[str, Any], environ: dict[str, str] | None = None) -> ServerSpec:
    config = load(tmp_path, {"servers": {"s": entry}}, environ)
    (spec,) = config.servers
    return spec


# --- which file --------------------------------------------------------------------------


def test_no_path_and_no_env_var_means_no_servers() -> None:
    assert load_config(environ={}) == Config()


def test_a_named_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as caught:
        load_config(missing, environ={})
    assert str(caught.value) == (
        f"config error: {missing}: $: the file does not exist; check the path, "
        "or name no config file to run with no servers"
    )


def test_env_var_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, {"servers": {"t": {"command": "t"}}})
    config = load_config(environ={"MCP_SUPERVISOR_CONFIG": str(path)})
    assert [s.name for s in config.servers] == ["t"]
    assert config.source == str(path)


def test_env_var_pointing_nowhere_is_an_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone.json"
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"MCP_SUPERVISOR_CONFIG": str(gone)})
    assert str(caught.value) == (
        f"config error: {gone}: $: the file named by $MCP_SUPERVISOR_CONFIG does not exist; "
        "fix the variable, or unset it to run with no servers"
    )


def test_an_empty_env_var_names_no_file() -> None:
    assert load_config(environ={"MCP_SUPERVISOR_CONFIG": ""}) == Config()


def test_argument_wins_over_env_var(tmp_path: Path) -> None:
    chosen = write(tmp_path, {"servers": {"chosen": {"command": "a"}}}, "a.json")
    other = write(tmp_path, {"servers": {"other": {"command": "b"}}}, "b.json")
    config = load_config(chosen, environ={"MCP_SUPERVISOR_CONFIG": str(other)})
    assert [s.name for s in config.servers] == ["chosen"]


def test_process_environment_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, {"servers": {"t": {"command": "${env:SUPERVISOR_TEST_CMD}"}}})
    monkeypatch.setenv("SUPERVISOR_TEST_CMD", "my-server")
    monkeypatch.setenv("MCP_SUPERVISOR_CONFIG", str(path))
    assert load_config().servers[0].command == ("my-server",)


def test_unreadable_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, environ={})  # a directory
    assert caught.value.json_path == "$"
    assert caught.value.problem.startswith("cannot read the file (")


# --- dialects ----------------------------------------------------------------------------


def test_canonical_dialect_with_command_string_plus_args(tmp_path: Path) -> None:
    spec = one(tmp_path, {"command": "npx", "args": ["-y", "@playwright/mcp", "--headless"]})
    assert spec.type == "local"
    assert spec.command == ("npx", "-y", "@playwright/mcp", "--headless")


def test_command_as_list_and_args_appended(tmp_path: Path) -> None:
    spec = one(tmp_path, {"command": ["python", "-m", "srv"], "args": ["--x"]})
    assert spec.command == ("python", "-m", "srv", "--x")


def test_design_example_reads_as_documented(tmp_path: Path) -> None:
    doc = {
        "servers": {
            "time": {"type": "local", "command": ["python", "-m", "mcp_server_time"],
                     "env": {"TZ": "UTC"}, "trusted": True},
            "github": {"type": "remote", "url": "https://api.example/mcp",
                       "headers": {"Authorization": "Bearer ${env:GITHUB_TOKEN}"}},
            "docs": {"type": "remote", "url": "https://docs.example/mcp",
                     "oauth": {"scope": "read"}},
        },
        "tool_search": {"enabled": "auto", "threshold": 20, "max_matches": 10},
        "trust": {"rules": [{"permission": "mcp:github:*", "pattern": "*", "action": "allow"}]},
        "admin": {"bind": "127.0.0.1:8765", "tokens": {"${env:ADMIN_TOKEN}": "default"}},
    }  # fmt: skip
    env = {"GITHUB_TOKEN": "gh-123", "ADMIN_TOKEN": "adm-789-0123456789"}
    config = load(tmp_path, doc, env)
    assert [s.name for s in config.servers] == ["time", "github", "docs"]
    time, github, docs = config.servers
    assert (time.type, time.env, time.trusted) == ("local", {"TZ": "UTC"}, True)
    assert github.headers == {"Authorization": "Bearer gh-123"}
    assert docs.oauth == {"scope": "read"}
    assert config.trust.rules == (TrustRule("mcp:github:*", "*", "allow"),)
    assert config.admin.tokens == {"adm-789-0123456789": TokenGrant("default", Role.TENANT)}
    assert config.server("github") is github


def test_desktop_dialect(tmp_path: Path) -> None:
    doc = {
        "mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]},
            "sentry": {"url": "https://mcp.sentry.dev/mcp"},
            "off": {"command": "x", "disabled": True},
            "stdio": {"type": "stdio", "command": "x"},
        }
    }
    specs = {s.name: s for s in load(tmp_path, doc).servers}
    assert specs["fs"].command == ("npx", "-y", "server-filesystem", "/tmp")
    assert (specs["sentry"].type, specs["sentry"].url) == ("remote", "https://mcp.sentry.dev/mcp")
    assert specs["off"].enabled is False
    assert specs["stdio"].type == "local"


def test_websocket_entries_read_by_the_dialects(tmp_path: Path) -> None:
    doc = {
        "mcpServers": {
            "shared-fs": {"type": "websocket", "url": "ws://10.0.0.5:8765/v1/bridge",
                          "server_name": "filesystem", "token": "${env:BRIDGE_TOKEN}"},
            "bridge": {"transport": "websocket", "url": "wss://h/v1/bridge", "serverName": "pw"},
            "inferred": {"url": "ws://h:1/v1/bridge"},
        }
    }  # fmt: skip
    specs = {s.name: s for s in load(tmp_path, doc, {"BRIDGE_TOKEN": "br-456"}).servers}
    assert (specs["shared-fs"].type, specs["shared-fs"].server_name) == ("websocket", "filesystem")
    assert specs["shared-fs"].headers == {"Authorization": "Bearer br-456"}
    assert (specs["bridge"].type, specs["bridge"].server_name) == ("websocket", "pw")
    assert (specs["inferred"].type, specs["inferred"].server_name) == ("websocket", "inferred")
    assert describe_config(Config(servers=(specs["bridge"],))) == [
        "bridge [websocket] wss://h/v1/bridge -> pw (enabled, lazy, shared, untrusted)"
    ]


@pytest.mark.parametrize("dialect", ["servers", "mcpServers", "mcp"])
@pytest.mark.parametrize(
    "entry",
    [
        {"type": "websocket", "url": "ws://h:1/v1/bridge", "server_name": "fs"},
        {"transport": "websocket", "url": "wss://h/v1/bridge", "serverName": "fs", "enabled": False},
        {"url": "ws://h:1/v1/bridge"},
    ],
)
def test_a_websocket_server_loads_in_every_dialect(
    tmp_path: Path, dialect: str, entry: dict[str, Any]
) -> None:
    if dialect == "mcp":
        entry = {"type": "websocket", **{k: v for k, v in entry.items() if k != "transport"}}
    time, bridge = load(tmp_path, {dialect: {"time": {"command": "t"}, "shared-fs": entry}}).servers
    assert (time.type, bridge.type) == ("local", "websocket")
    assert bridge.server_name == entry.get("server_name", entry.get("serverName", "shared-fs"))
    assert bridge.url == entry["url"] and bridge.command == ()


def test_connectors_dialect(tmp_path: Path) -> None:
    doc = {
        "mcp": {
            "time": {"type": "local", "command": ["uvx", "mcp-server-time"], "timeout_ms": 5000},
            "linear": {"type": "remote", "url": "https://mcp.linear.app/mcp", "oauth": {},
                       "headers": {"X-Team": "core"}, "enabled": False},
        },
        "tool_search": {"enabled": False, "threshold": 5, "max_matches": 3},
    }  # fmt: skip
    config = load(tmp_path, doc)
    time, linear = config.servers
    assert (time.command, time.call_timeout_s) == (("uvx", "mcp-server-time"), 5.0)
    assert (linear.type, linear.oauth, linear.enabled) == ("remote", {}, False)
    assert linear.headers == {"X-Team": "core"}
    assert (config.tool_search.enabled, config.tool_search.threshold) == (False, 5)
    assert config.tool_search.max_matches == 3


@pytest.mark.parametrize("name", ["host-runtime.json", "desktop.json", "connectors.json"])
def test_shipped_examples_load(name: str) -> None:
    env = {"GITHUB_TOKEN": "t1", "ADMIN_TOKEN": "t2-admin-0123456789", "BRIDGE_TOKEN": "t3"}
    config = load_config(EXAMPLES / name, environ=env)
    assert config.source == str(EXAMPLES / name)
    assert len(config.servers) >= 2
    assert {s.type for s in config.servers} >= {"local", "remote"}
    assert all(line.startswith(s.name + " [") for s, line in zip(
        config.servers, describe_config(config), strict=True))  # fmt: skip


def test_empty_sections_are_fine(tmp_path: Path) -> None:
    assert load(tmp_path, {}) == Config(source=str(tmp_path / "config.json"))
    assert load(tmp_path, {"mcpServers": {}}).servers == ()


# --- defaults and units ------------------------------------------------------------------


def test_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, {"servers": {"s": {"command": "srv"}}})
    spec = config.servers[0]
    assert (spec.init_timeout_s, spec.call_timeout_s, spec.max_call_timeout_s) == (60, 30, 300)
    assert (spec.reconnect_schedule_s, spec.reconnect_jitter) == ((1, 2, 5, 15, 60), 0.1)
    assert (spec.start, spec.scope, spec.trusted, spec.enabled) == (
        Start.LAZY, Scope.SHARED, False, True)  # fmt: skip
    assert (spec.max_output_bytes, spec.cwd, spec.secrets) == (16_384, None, ())
    assert (config.tool_search.enabled, config.tool_search.threshold) == ("auto", 20)
    assert config.tool_search.max_matches == 10
    assert (config.trust.max_description_length, config.trust.approval_timeout_s) == (200, 120)
    assert (config.admin.bind, config.admin.tokens) == ("127.0.0.1:8765", {})
    assert config.state_dir is None


def test_milliseconds_become_seconds(tmp_path: Path) -> None:
    spec = one(tmp_path, {"command": "s", "init_timeout_ms": 90_000, "call_timeout_ms": 1500,
                          "max_call_ms": 4000, "max_output_bytes": 100,
                          "reconnect_schedule_s": [0, 0.5, 3]})  # fmt: skip
    assert (spec.init_timeout_s, spec.call_timeout_s, spec.max_call_s) == (90.0, 1.5, 4.0)
    assert spec.max_call_timeout_s == 4.0
    assert (spec.max_output_bytes, spec.reconnect_schedule_s) == (100, (0.0, 0.5, 3.0))


@pytest.mark.parametrize("jitter", [0, 0.25, 0.5])
def test_a_reconnect_jitter_from_0_to_half_is_taken(tmp_path: Path, jitter: float) -> None:
    assert one(tmp_path, {"command": "s", "reconnect_jitter": jitter}).reconnect_jitter == jitter


def test_timeout_alias_and_equal_duplicate(tmp_path: Path) -> None:
    assert one(tmp_path, {"command": "s", "timeout_ms": 2000}).call_timeout_s == 2.0
    both = one(tmp_path, {"command": "s", "timeout_ms": 2000, "call_timeout_ms": 2000})
    assert both.call_timeout_s == 2.0
    assert one(tmp_path, {"command": "s", "timeout_ms": 500}).max_call_timeout_s == 5.0


def test_other_settings(tmp_path: Path) -> None:
    spec = one(tmp_path, {"command": "s", "scope": "session", "start": "eager", "trusted": True,
                          "enabled": False})  # fmt: skip
    assert (spec.scope, spec.start, spec.trusted, spec.enabled) == (
        Scope.SESSION, Start.EAGER, True, False)  # fmt: skip
    doc = {"trust": {"approval_timeout_ms": 1500, "max_description_length": 50,
                     "rules": [{"permission": "*", "action": "deny"}]},
           "admin": {"bind": "[::1]:0"}, "tool_search": {"enabled": True}}  # fmt: skip
    config = load(tmp_path, doc)
    assert config.trust.approval_timeout_s == 1.5
    assert config.trust.max_description_length == 50
    assert config.trust.rules == (TrustRule("*", "*", "deny"),)
    assert (config.admin.bind, config.tool_search.enabled) == ("[::1]:0", True)


def test_relative_paths_are_taken_from_the_config_directory(tmp_path: Path) -> None:
    sub = tmp_path / "conf"
    sub.mkdir()
    doc = {"servers": {"s": {"command": "./bin/srv", "cwd": "work/../data"}}, "state_dir": "state"}
    path = write(sub, doc)
    config = load_config(path, environ={})
    assert config.servers[0].cwd == str(sub / "data")
    assert config.servers[0].command == ("./bin/srv",)  # left for the spawn's PATH lookup
    assert config.state_dir == str(sub / "state")
    absolute = one(tmp_path, {"command": "s", "cwd": "/srv/x"})
    assert absolute.cwd == os.path.normpath("/srv/x")


# --- expansion and secrets ---------------------------------------------------------------


def test_env_and_file_expansion(tmp_path: Path) -> None:
    (tmp_path / "token.txt").write_text("file-secret\n", encoding="utf-8")
    spec = one(
        tmp_path,
        {"command": ["srv", "--key=${env:API_KEY}", "price: $${literal}"],
         "env": {"TOKEN": "${file:token.txt}", "PLAIN": "x-${env:SUFFIX}"}},
        {"API_KEY": "k-1", "SUFFIX": "tail"},
    )  # fmt: skip
    assert spec.command == ("srv", "--key=k-1", "price: ${literal}")
    assert spec.env == {"TOKEN": "file-secret", "PLAIN": "x-tail"}
    assert set(spec.secrets) == {"k-1", "file-secret", "tail"}


def test_expansion_in_oauth_and_literal_credentials_are_secrets(tmp_path: Path) -> None:
    spec = one(tmp_path, {"url": "https://h/mcp", "headers": {"X-Api-Key": "literal-key"},
                          "oauth": {"client_id": "app", "client_secret": "cs-1",
                                    "scope": "${env:SCOPE}"}},
               {"SCOPE": "read-scope"})  # fmt: skip
    assert spec.oauth == {"client_id": "app", "client_secret": "cs-1", "scope": "read-scope"}
    assert set(spec.secrets) == {"literal-key", "cs-1", "read-scope"}


def test_the_jwt_bearer_flows_assertion_is_a_secret_and_its_file_a_full_path(tmp_path: Path) -> None:
    spec = one(tmp_path, {"url": "https://h/mcp", "oauth": {"flow": "jwt_bearer", "client_id": "wl",
                                                             "assertion": "eyJ.literal.jwt"}})  # fmt: skip
    assert "eyJ.literal.jwt" in spec.secrets
    spec = one(tmp_path, {"url": "https://h/mcp", "oauth": {"flow": "jwt_bearer", "client_id": "wl",
                                                             "assertion_file": "tokens/wl.jwt",
                                                             "dpop": "required"}})  # fmt: skip
    assert spec.oauth is not None
    assert spec.oauth["assertion_file"] == str(tmp_path / "tokens" / "wl.jwt")
    assert spec.oauth["dpop"] == "required"


def test_secrets_stay_out_of_reprs_and_descriptions(tmp_path: Path) -> None:
    doc = {
        "servers": {
            "gh": {"url": "https://user:pw-secret@h/mcp?api_key=q-secret&x=1",
                   "headers": {"Authorization": "Bearer ${env:GH}"}},
            "cli": {"command": ["tool", "--token", "${env:CLI}"]},
        },
        "admin": {"tokens": {"${env:ADMIN}": "default", "literal-admin-token": "other"}},
    }  # fmt: skip
    config = load(tmp_path, doc, {"GH": "gh-secret", "CLI": "cli-secret", "ADMIN": "adm-secret-0123456789"})
    text = repr(config) + "\n".join(describe_config(config))
    for secret in ("gh-secret", "cli-secret", "adm-secret", "literal-admin"):  # prefixes too
        assert secret not in text
    assert {"gh-secret", "cli-secret", "adm-secret-0123456789", "literal-admin-token"} <= set(config.secrets)
    assert {"pw-secret", "q-secret"} <= set(config.server("gh").secrets)
    lines = describe_config(config)
    assert "pw-secret" not in lines[0] and "q-secret" not in lines[0]
    assert lines[0].startswith("gh [remote] https://user:***@h/mcp?api_key=***&x=1 (")
    assert lines[1] == "cli [local] tool --token *** (enabled, lazy, shared, untrusted)"


def test_describe_config_lines(tmp_path: Path) -> None:
    doc = {"mcpServers": {
        "a": {"command": "python", "args": ["-m", "x y"], "start": "eager", "scope": "session",
              "trusted": True, "disabled": True},
    }}  # fmt: skip
    assert describe_config(load(tmp_path, doc)) == [
        "a [local] python -m 'x y' (disabled, eager, session, trusted)",
    ]


def test_config_server_lookup_names_known_servers(tmp_path: Path) -> None:
    config = load(tmp_path, {"servers": {"a": {"command": "a"}}})
    with pytest.raises(KeyError, match="known: a"):
        config.server("b")


# --- errors ------------------------------------------------------------------------------

S = "$.servers.s"
JITTER = (
    "expected a fraction from 0 to 0.5 (0.1: each delay moves by up to a tenth of itself; 0: no jitter), got"
)

ERRORS: list[tuple[object, str, str]] = [
    # (document, json path, exact problem)
    ({"servers": {"s": {"command": 42}}}, f"{S}.command",
     "expected a list of strings or a string, got 42"),
    ({"servers": {"s": {"comand": "x"}}}, S, "unknown key 'comand' (did you mean 'command'?)"),
    ({"servers": {"s": {"initTimeoutMs": 1, "command": "x"}}}, S,
     "unknown key 'initTimeoutMs' (did you mean 'init_timeout_ms'?)"),
    ({"servers": {"s": {"command": ["a", 1]}}}, f"{S}.command[1]", "expected a string, got 1"),
    ({"servers": {"s": {"command": []}}}, f"{S}.command",
     "expected a list of strings or a string, got []"),
    ({"servers": {"s": {"command": " "}}}, f"{S}.command",
     "the program name is empty; name the executable to run"),
    ({"servers": {"s": {"command": "a", "args": "-y x"}}}, f"{S}.args",
     'expected a list of strings, got "-y x"'),
    ({"servers": {"s": {}}}, S,
     "a local server needs 'command' (a list like [\"python\", \"-m\", \"server\"] or a string "
     "plus 'args'), or a 'url' for a remote server"),
    ({"servers": {"s": "python"}}, S,
     'expected an object with the server\'s settings, got "python"'),
    ({"servers": {"": {"command": "a"}}}, '$.servers[""]',
     "server names must not be empty; give the server a name"),
    ({"servers": []}, "$.servers",
     "expected an object mapping server names to their settings, got []"),
    ([], "$", 'expected a JSON object at the top, like {"servers": {...}}, got []'),
    ({"servers": {}, "mcpServers": {}}, "$",
     "found both 'servers' and 'mcpServers'; keep one map of servers"),
    ({"server": {}}, "$", "unknown key 'server' (did you mean 'servers'?)"),
    ({"servers": {"s": {"type": "docker", "command": "a"}}}, f"{S}.type",
     "expected 'local', 'remote' or 'websocket' (also accepted: stdio, http, streamable-http, "
     'sse, ws), got "docker"'),
    ({"servers": {"s": {"type": "local", "transport": "websocket", "url": "ws://h/"}}},
     f"{S}.transport", "'transport' says websocket but 'type' says local; keep one of them"),
    ({"servers": {"s": {"type": "local", "command": "a", "url": "http://h/"}}}, f"{S}.url",
     "'url' does not apply to a local server (only remote or websocket); remove it or change "
     '"type"'),
    ({"servers": {"s": {"url": "https://h/", "command": "a"}}}, f"{S}.command",
     "'command' does not apply to a remote server (only local); remove it or change \"type\""),
    ({"servers": {"s": {"url": "https://h/", "oauth": True}}}, f"{S}.oauth",
     "expected an object of OAuth settings or false, got true"),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"scopes": "a"}}}}, f"{S}.oauth.scopes",
     "unknown OAuth setting; expected one of client_id, client_secret, scope, flow, "
     "client_metadata_url, private_key, signing_algorithm, token_endpoint_auth_method, "
     "idp_token_endpoint, idp_client_id, idp_client_secret, id_token, dpop, assertion, "
     "assertion_file, token_exchange, subject_token_type"),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"token_exchange": "yes"}}}},
     f"{S}.oauth.token_exchange", 'expected true or false, got "yes"'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"token_exchange": True, "flow": "client_credentials",
                                                        "client_id": "c"}}}},
     f"{S}.oauth.token_exchange",
     "token exchange stands in for a person's sign-in (flow authorization_code), not the "
     "client_credentials flow; remove it or the flow"),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"scope": ["a"]}}}}, f"{S}.oauth.scope",
     'expected a string, got ["a"]'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"flow": "implicit"}}}}, f"{S}.oauth.flow",
     'expected one of authorization_code, client_credentials, cross_app_access, jwt_bearer, '
     'got "implicit"'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"dpop": "true"}}}}, f"{S}.oauth.dpop",
     'expected one of auto, required, off, got "true"'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"flow": "jwt_bearer", "assertion": "j"}}}},
     f"{S}.oauth", 'the jwt_bearer flow needs "client_id"'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"flow": "jwt_bearer", "client_id": "c"}}}},
     f"{S}.oauth", 'the jwt_bearer flow needs one of "assertion" or "assertion_file"'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"flow": "jwt_bearer", "client_id": "c",
                                                        "assertion": "j", "assertion_file": "f"}}}},
     f"{S}.oauth", 'the jwt_bearer flow needs one of "assertion" or "assertion_file"'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"assertion_file": "f"}}}},
     f"{S}.oauth.assertion_file", 'only the "jwt_bearer" flow takes a workload assertion'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"flow": "cross_app_access", "client_id": "c",
                                                        "id_token": "t"}}}}, f"{S}.oauth",
     'the cross_app_access flow needs "idp_token_endpoint"'),
    ({"servers": {"s": {"url": "https://h/", "oauth": {"flow": "client_credentials"}}}}, f"{S}.oauth",
     'the client_credentials flow needs "client_id" (and "client_secret" or "private_key")'),
    ({"servers": {"s": {"command": "a", "protocol": "2026"}}}, f"{S}.protocol",
     "expected 'auto' or '2026-07-28' or '2025-11-25', got \"2026\""),
    ({"servers": {"s": {"command": "a", "log_level": "warn"}}}, f"{S}.log_level",
     "expected 'debug' or 'info' or 'notice' or 'warning' or 'error' or 'critical' or 'alert' or "
     "'emergency', got \"warn\" (did you mean 'warning'?)"),
    ({"servers": {"s": {"type": "remote"}}}, S,
     "a remote server needs 'url' (an http:// or https:// URL of the server's MCP endpoint, "
     "e.g. https://host/mcp)"),
    ({"servers": {"s": {"type": "remote", "url": "ws://h/x"}}}, f"{S}.url",
     'a remote server needs an http:// or https:// URL, got "ws://h/x"; for a WebSocket bridge '
     'set "type": "websocket"'),
    ({"servers": {"s": {"type": "remote", "url": "api.example/mcp"}}}, f"{S}.url",
     'a remote server needs an http:// or https:// URL, got "api.example/mcp"'),
    ({"servers": {"s": {"url": "http://h:99999/"}}}, f"{S}.url",
     'not a valid URL (Port out of range 0-65535): "http://h:99999/"'),
    ({"servers": {"s": {"transport": "websocket", "serverName": "x"}}}, S,
     "a websocket server needs 'url' (a ws:// or wss:// URL of the remote bridge, "
     "e.g. ws://host:8765/v1/bridge)"),
    ({"servers": {"s": {"url": "ws://h/", "server_name": "a", "serverName": "a"}}},
     f"{S}.serverName", "give 'server_name' or 'serverName', not both"),
    ({"servers": {"s": {"url": "ws://h/", "token": "t", "headers": {"authorization": "x"}}}},
     f"{S}.token", "give either 'token' or an Authorization header, not both"),
    ({"servers": {"s": {"url": "https://h/", "headers": {"Bad Name": "x"}}}},
     f'{S}.headers["Bad Name"]', "'Bad Name' is not a valid HTTP header name"),
    ({"servers": {"s": {"command": "a", "env": {"PORT": 8080}}}}, f"{S}.env.PORT",
     'expected a string, got 8080 (quote it: "8080")'),
    ({"servers": {"s": {"command": "a", "env": []}}}, f"{S}.env", "expected an object, got []"),
    ({"servers": {"s": {"command": "a", "trusted": "yes"}}}, f"{S}.trusted",
     'expected true or false, got "yes"'),
    ({"servers": {"s": {"command": "a", "enabled": True, "disabled": True}}}, f"{S}.disabled",
     "'disabled' contradicts 'enabled'; keep one"),
    ({"servers": {"s": {"command": "a", "scope": "global"}}}, f"{S}.scope",
     "expected 'shared' or 'session', got \"global\""),
    ({"servers": {"s": {"command": "a", "start": "Eager"}}}, f"{S}.start",
     "expected 'lazy' or 'eager', got \"Eager\" (did you mean 'eager'?)"),
    ({"servers": {"s": {"command": "a", "init_timeout_ms": 0}}}, f"{S}.init_timeout_ms",
     "expected a number greater than 0, got 0"),
    ({"servers": {"s": {"command": "a", "call_timeout_ms": "30s"}}}, f"{S}.call_timeout_ms",
     'expected a number, got "30s"'),
    ('{"servers": {"s": {"command": "a", "call_timeout_ms": 1e400}}}', f"{S}.call_timeout_ms",
     "expected a finite number, got Infinity"),
    ({"servers": {"s": {"command": "a", "timeout_ms": 1000, "call_timeout_ms": 2000}}},
     f"{S}.timeout_ms", "timeout_ms (1000) contradicts call_timeout_ms (2000); it is an alias, "
     "keep one"),
    ({"servers": {"s": {"command": "a", "max_call_ms": 1000}}}, f"{S}.max_call_ms",
     "1000 is below the call timeout (30000 ms); the absolute cap must be at least the call "
     "timeout"),
    ({"servers": {"s": {"command": "a", "max_output_bytes": 1.5}}}, f"{S}.max_output_bytes",
     "expected a whole number, got 1.5"),
    ({"servers": {"s": {"command": "a", "max_output_bytes": 0}}}, f"{S}.max_output_bytes",
     "expected a number of at least 1, got 0"),
    ({"servers": {"s": {"command": "a", "reconnect_schedule_s": []}}},
     f"{S}.reconnect_schedule_s",
     "expected a non-empty list of delays in seconds, like [1, 2, 5, 15, 60], got []"),
    ({"servers": {"s": {"command": "a", "reconnect_schedule_s": [1, -2]}}},
     f"{S}.reconnect_schedule_s[1]", "expected a number of at least 0, got -2"),
    ({"servers": {"s": {"command": "a", "reconnect_jitter": 0.6}}}, f"{S}.reconnect_jitter",
     f"{JITTER} 0.6"),
    ({"servers": {"s": {"command": "a", "reconnect_jitter": -0.1}}}, f"{S}.reconnect_jitter",
     f"{JITTER} -0.1"),
    ({"servers": {"s": {"command": "a", "reconnect_jitter": "10%"}}}, f"{S}.reconnect_jitter",
     f'{JITTER} "10%"'),
    ({"servers": {"s": {"command": "a", "reconnect_jitter": True}}}, f"{S}.reconnect_jitter",
     f"{JITTER} true"),
    ({"tool_search": {"enabled": "yes"}}, "$.tool_search.enabled",
     'expected "auto", true or false, got "yes"'),
    ({"tool_search": {"treshold": 3}}, "$.tool_search",
     "unknown key 'treshold' (did you mean 'threshold'?)"),
    ({"tool_search": {"max_matches": 0}}, "$.tool_search.max_matches",
     "expected a number of at least 1, got 0"),
    ({"trust": {"rules": [{"permission": "github:*", "action": "allow"}]}},
     "$.trust.rules[0].permission",
     'expected "mcp:<server>:<tool>" (globs allowed), got "github:*"'),
    ({"trust": {"rules": [{"permission": "mcp:*", "action": "permit"}]}},
     "$.trust.rules[0].action", "expected 'allow' or 'ask' or 'deny', got \"permit\""),
    ({"trust": {"rules": [{"permission": "mcp:*"}]}}, "$.trust.rules[0]",
     "the rule has no 'action'; every rule needs permission and action"),
    ({"trust": {"rules": [{"permission": "mcp:*", "action": "ask", "when": 1}]}},
     "$.trust.rules[0]", "unknown key 'when'; allowed keys are action, pattern, permission"),
    ({"trust": {"approval_timeout_s": 1, "approval_timeout_ms": 1000}}, "$.trust",
     "give 'approval_timeout_s' or 'approval_timeout_ms', not both"),
    ({"admin": {"bind": "localhost"}}, "$.admin.bind",
     'expected HOST:PORT like 127.0.0.1:8765 ([::1]:8765 for IPv6), got "localhost"'),
    ({"admin": {"bind": "127.0.0.1:70000"}}, "$.admin.bind",
     'expected HOST:PORT like 127.0.0.1:8765 ([::1]:8765 for IPv6), got "127.0.0.1:70000"'),
    ({"admin": {"tokens": {"tok-secret": 7}}}, "$.admin.tokens",
     "token #1 maps to 7; expected a tenant name (a non-empty string such as \"default\") or "
     '{"tenant": "<name>", "role": "operator" | "tenant" | "peer"}'),
    ({"admin": {"tokens": {"": "default"}}}, "$.admin.tokens",
     "token #1 is empty; set it or remove the entry"),
    ({"state_dir": 3}, "$.state_dir", "expected a directory path or null, got 3"),
    ("", "$", 'the file is empty; write {"servers": {}} for no servers'),
    ('{"servers": {\n  "a": {"command": "x",}\n}}', "$",
     "invalid JSON at line 2 column 24: Expecting property name enclosed in double quotes; "
     "remove the trailing comma"),
    ('{\n  // my servers\n  "servers": {}\n}', "$",
     "invalid JSON at line 2 column 3: Expecting property name enclosed in double quotes; "
     "comments are not allowed in JSON, remove them"),
    ('{"servers": {} "x": 1}', "$",
     "invalid JSON at line 1 column 16: Expecting ',' delimiter; fix the syntax there"),
    ('{"servers": {"s": {"command": "a", "call_timeout_ms": NaN}}}', "$",
     "invalid JSON: NaN is not valid JSON; write a number or null"),
    ('{"servers": {"t": {"command": "a"}, "t": {"command": "b"}}}', "$.servers",
     "duplicate key 't'; JSON keeps only the last one, so rename or merge them"),
    ('{"admin": {"tokens": {"tok-secret": "a", "tok-secret": "b"}}}', "$.admin.tokens",
     "the same token is listed twice; keep one"),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "json_path", "problem"), ERRORS)
def test_error_messages(tmp_path: Path, doc: object, json_path: str, problem: str) -> None:
    error = fail(tmp_path, doc)
    assert (error.json_path, error.problem) == (json_path, problem)
    assert "tok-secret" not in str(error)


def test_unset_env_reference_names_it_and_the_path(tmp_path: Path) -> None:
    headers = {"Authorization": "Bearer ${env:GITHUB_TOKEN}"}
    error = fail(tmp_path, {"servers": {"gh": {"url": "https://h/mcp", "headers": headers}}})
    assert error.json_path == "$.servers.gh.headers.Authorization"
    assert error.problem == "${env:GITHUB_TOKEN} is not set; export it or remove the reference"


def test_unset_admin_token_reference(tmp_path: Path) -> None:
    error = fail(tmp_path, {"admin": {"tokens": {"${env:ADMIN_TOKEN}": "default"}}})
    assert error.json_path == "$.admin.tokens"
    assert error.problem == "${env:ADMIN_TOKEN} is not set; export it or remove the reference"


def test_unreadable_file_reference(tmp_path: Path) -> None:
    error = fail(tmp_path, {"servers": {"s": {"command": "a", "env": {"K": "${file:nope.txt}"}}}})
    assert error.json_path == "$.servers.s.env.K"
    assert error.problem == (
        f"${{file:nope.txt}} cannot be read (No such file or directory: {tmp_path / 'nope.txt'}); "
        "create it or remove the reference"
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("${GITHUB_TOKEN}", "unknown reference ${GITHUB_TOKEN}; write ${env:GITHUB_TOKEN} for an "
         "environment variable or ${file:PATH} for a file's contents ($${ is a literal ${)"),
        ("${input:pat}", "unsupported reference ${input:pat}; only ${env:NAME} and ${file:PATH} "
         "are expanded"),
        ("${env:X", 'unterminated reference in "${env:X"; close it with \'}\' or write $${ for a '
         "literal ${"),
        ("${env:}", "${env:} does not name an environment variable"),
    ],
)  # fmt: skip
def test_bad_references(tmp_path: Path, value: str, problem: str) -> None:
    error = fail(tmp_path, {"servers": {"s": {"command": ["a", value]}}})
    assert (error.json_path, error.problem) == ("$.servers.s.command[1]", problem)


def test_enum_errors_quote_the_written_value_not_the_expanded_one(tmp_path: Path) -> None:
    doc = {"servers": {"s": {"command": "a", "scope": "${env:SCOPE}"}}}
    error = fail(tmp_path, doc, {"SCOPE": "hidden-value"})
    assert error.problem == "expected 'shared' or 'session', got \"${env:SCOPE}\""


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"servers": {"\xff": {}}}')
    with pytest.raises(ConfigError, match=r": \$: not UTF-8 text \(bad byte at offset 14\)"):
        load_config(path, environ={})


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'\xef\xbb\xbf{"servers": {"s": {"command": "a"}}}')
    assert len(load_config(path, environ={}).servers) == 1


@pytest.mark.parametrize("value", ["debug", "notice", "emergency"])
def test_log_level_reaches_the_spec(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": {"s": {"command": "a", "log_level": value}}}))
    assert load_config(path).servers[0].log_level == value
    path.write_text(json.dumps({"servers": {"s": {"command": "a"}}}))
    assert load_config(path).servers[0].log_level == "warning"


@pytest.mark.parametrize("value", ["auto", "2026-07-28", "2025-11-25"])
def test_protocol_setting_reaches_the_spec(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": {"s": {"url": "https://h/mcp", "protocol": value}}}))
    assert load_config(path).servers[0].protocol == value
    path.write_text(json.dumps({"servers": {"s": {"command": "a"}}}))
    assert load_config(path).servers[0].protocol == "auto"
