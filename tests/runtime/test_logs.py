"""``StructuredFormatter`` and ``configure``: one line per event, key=value or JSON, redacted.

The contract: structured, one line per event, the server's name and state on every
line about a server, secrets redacted. The formatter is the last stop before stderr,
so everything that reaches an operator passes through it.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import pytest

from actors.redaction import Redactor
from supervisor.runtime.logs import StructuredFormatter, configure

SECRET = "s3cr3t-value-9f8e7d"
# 2024-01-02T03:04:05.678 UTC
CREATED = 1704164645.678
STAMP = "2024-01-02T03:04:05.678Z"
TEXT_LINE = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<level>debug|info|warning|error|critical) +"
    r"(?P<rest>\S.*)\Z"
)
PAIR = re.compile(r' (?P<key>[A-Za-z_]\w*)=(?P<value>"(?:[^"\\]|\\.)*"|[^\s"]+)')
TAIL = re.compile(f"(?:{PAIR.pattern})+")

ExcInfo = tuple[type[BaseException], BaseException, TracebackType]


def record(
    msg: str = "state",
    *args: object,
    level: int = logging.INFO,
    fields: dict[str, Any] | None = None,
    exc_info: ExcInfo | None = None,
    **attributes: Any,
) -> logging.LogRecord:
    rec = logging.LogRecord("test", level, __file__, 1, msg, args or None, exc_info)
    rec.created = CREATED
    rec.msecs = 678.0
    if fields is not None:
        rec.fields = fields
    for key, value in attributes.items():
        setattr(rec, key, value)
    return rec


def text(rec: logging.LogRecord, secrets: tuple[str, ...] = ()) -> str:
    return StructuredFormatter(Redactor(secrets)).format(rec)


def as_json(rec: logging.LogRecord, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    line = StructuredFormatter(Redactor(secrets), json_lines=True).format(rec)
    assert "\n" not in line
    obj = json.loads(line)
    assert isinstance(obj, dict)
    return obj


def pairs(line: str) -> dict[str, Any]:
    """The key=value tail of a text line (after a possibly multi-word event), decoded."""
    match = TEXT_LINE.fullmatch(line)
    assert match, line
    rest = match["rest"]
    for start in (i for i, ch in enumerate(rest) if ch == " "):
        if TAIL.fullmatch(rest, start):
            return {
                m["key"]: json.loads(m["value"]) if m["value"].startswith('"') else m["value"]
                for m in PAIR.finditer(rest, start)
            }
    return {}


def boom() -> ExcInfo:
    try:
        raise ValueError("boom: it broke\non two lines")
    except ValueError:
        info = sys.exc_info()
    assert info[0] is not None and info[1] is not None and info[2] is not None
    return info[0], info[1], info[2]


# ------------------------------------------------------------------ text lines


def test_text_line_shape_time_level_event_and_fields() -> None:
    line = text(record(fields={"server": "alpha", "state": "steady", "attempt": 3}))
    assert line == f"{STAMP} info    state server=alpha state=steady attempt=3"


@pytest.mark.parametrize(
    ("level", "name"),
    [(logging.DEBUG, "debug"), (logging.WARNING, "warning"), (logging.ERROR, "error")],
)
def test_level_is_lower_case(level: int, name: str) -> None:
    match = TEXT_LINE.fullmatch(text(record("hello", level=level)))
    assert match and match["level"] == name and match["rest"] == "hello"


def test_message_arguments_are_interpolated() -> None:
    assert text(record("mcp server %s stderr: %s", "alpha", "ready")).endswith(
        " info    mcp server alpha stderr: ready"
    )


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ("plain-value_1.2/x:y@z,w+", "plain-value_1.2/x:y@z,w+"),
        ("closed the connection", '"closed the connection"'),
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ("", '""'),
        ("a=b", '"a=b"'),
        ("two\nlines", r'"two\nlines"'),
    ],
)
def test_values_needing_it_are_quoted(value: str, rendered: str) -> None:
    line = text(record(fields={"server": "alpha", "reason": value}))
    assert line.endswith(f" reason={rendered}")
    assert pairs(line)["reason"] == value  # round-trips


def test_server_attribute_becomes_a_field_unless_given() -> None:
    assert pairs(text(record("tool dropped", server="beta")))["server"] == "beta"
    both = text(record(fields={"server": "alpha"}, server="beta"))
    assert pairs(both) == {"server": "alpha"}


def test_no_fields_no_trailing_space() -> None:
    assert text(record("supervisor stopped", fields={})) == f"{STAMP} info    supervisor stopped"


def test_newline_in_message_cannot_forge_a_second_line() -> None:
    forged = f"evil\n{STAMP} info    state server=x state=steady\rmore"
    line = text(record("tool dropped: %s", forged, level=logging.WARNING))
    assert "\n" not in line and "\r" not in line
    assert TEXT_LINE.fullmatch(line)


def test_exception_stays_on_one_line() -> None:
    line = text(record("child crashed", level=logging.ERROR, fields={"child": "a"}, exc_info=boom()))
    assert "\n" not in line
    error = pairs(line)["error"]
    assert error.startswith("Traceback (most recent call last):")
    assert "ValueError: boom: it broke" in error
    assert " | " in error  # the traceback's lines, joined


# ------------------------------------------------------------------ JSON lines


def test_json_line_has_time_level_event_and_typed_fields() -> None:
    obj = as_json(record(fields={"server": "alpha", "state": "backoff", "attempt": 2, "retry_in_s": 0.5}))
    assert obj == {
        "time": STAMP,
        "level": "info",
        "event": "state",
        "server": "alpha",
        "state": "backoff",
        "attempt": 2,
        "retry_in_s": 0.5,
    }


def test_json_line_with_awkward_values_is_still_one_valid_object() -> None:
    obj = as_json(record('a "quoted"\nmessage', fields={"reason": 'x "y"\nz', "none": None}, server="s"))
    assert obj["event"] == 'a "quoted"\nmessage'
    assert obj["reason"] == 'x "y"\nz'
    assert obj["none"] is None and obj["server"] == "s"


def test_json_exception_stays_on_one_line() -> None:
    obj = as_json(record("child crashed", level=logging.ERROR, exc_info=boom()))
    assert obj["level"] == "error"
    assert "ValueError: boom: it broke" in obj["error"]
    assert "\n" not in obj["error"]


# ------------------------------------------------------------------ redaction


@pytest.mark.parametrize("json_lines", [False, True], ids=["text", "json"])
def test_redaction_in_field_message_and_authorization(json_lines: bool) -> None:
    formatter = StructuredFormatter(Redactor([SECRET]), json_lines=json_lines)
    lines = [
        formatter.format(record(fields={"server": "a", "reason": f"bad token {SECRET} rejected"})),
        formatter.format(record("mcp server a stderr: %s", f"using {SECRET}")),
        formatter.format(record("request headers", fields={"headers": "Authorization: Bearer xyz"})),
        formatter.format(record("mcp server a stderr: Authorization: Bearer xyz")),
        formatter.format(record("sent Bearer xyz upstream")),
        formatter.format(record("crashed", exc_info=_raise_with(SECRET))),
    ]
    for line in lines:
        assert SECRET not in line, line
        assert "xyz" not in line, line
        assert "***" in line, line


def _raise_with(secret: str) -> ExcInfo:
    try:
        raise RuntimeError(f"login failed for {secret}")
    except RuntimeError:
        info = sys.exc_info()
    assert info[0] is not None and info[1] is not None and info[2] is not None
    return info[0], info[1], info[2]


@pytest.mark.parametrize("json_lines", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("secret", ['pa"ss-w0rd', "pa\\ss-w0rd", "tab\tsecret"])
def test_secret_that_json_escaping_would_disguise_is_still_masked(json_lines: bool, secret: str) -> None:
    formatter = StructuredFormatter(Redactor([secret]), json_lines=json_lines)
    for rec in (record(fields={"reason": f"got {secret} back"}), record("got %s back", secret)):
        line = formatter.format(rec)
        assert secret not in line
        assert json.dumps(secret)[1:-1] not in line, line
        assert "***" in line


@pytest.mark.parametrize("json_lines", [False, True], ids=["text", "json"])
def test_credential_shaped_field_is_masked_without_known_secrets(json_lines: bool) -> None:
    # Only the rendered line says "api_key=...": the redactor must run on the final line.
    line = StructuredFormatter(Redactor(), json_lines=json_lines).format(
        record(fields={"server": "a", "api_key": "hunter2-value"})
    )
    assert "hunter2" not in line and "***" in line


def test_redaction_keeps_the_line_structured() -> None:
    line = text(record(fields={"server": "a", "state": "backoff", "reason": f"x {SECRET}"}), (SECRET,))
    assert pairs(line) == {"server": "a", "state": "backoff", "reason": "x ***"}


# ------------------------------------------------------------------ configure()


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root_logger")
def test_configure_sends_redacted_lines_to_stderr_once(capsys: pytest.CaptureFixture[str]) -> None:
    configure([SECRET], level=logging.DEBUG)
    configure([SECRET], level=logging.DEBUG)  # again: replaces, never duplicates
    logging.getLogger("actors.connection").debug("stderr: %s", SECRET)
    logging.getLogger("supervisor").info("state", extra={"fields": {"server": "a", "state": "steady"}})
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].endswith(" debug   stderr: ***")
    assert pairs(err[1]) == {"server": "a", "state": "steady"}


@pytest.mark.usefixtures("restore_root_logger")
def test_configure_level_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    configure(level=logging.INFO, json_lines=True)
    log = logging.getLogger("supervisor")
    log.debug("hidden")
    log.info("starting", extra={"fields": {"servers": 2}})
    err = capsys.readouterr().err.splitlines()
    assert [json.loads(line)["event"] for line in err] == ["starting"]
    assert json.loads(err[0])["servers"] == 2
