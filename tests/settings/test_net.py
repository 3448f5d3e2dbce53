"""The one loopback check and the one ``HOST:PORT`` parser (``supervisor/settings/net.py``).

Every "is this loopback?" in the project (``serve --bind``, the admin API's bind, a
peer's address, the host of ``Host``/target/``Origin``) and every ``HOST:PORT``
(``admin.bind``, ``--bind``, ``server.serve``) goes through these, so the tables pin the
edges: brackets, names, non-canonical numbers, ports and garbage.
"""

from __future__ import annotations

import pytest

from supervisor.settings.net import Bind, bind_is_loopback, is_loopback_host, parse_bind


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("127.255.255.254", True),
        ("localhost", True),
        ("LOCALHOST", True),  # names are case-insensitive; the resolver agrees
        ("LocalHost", True),
        ("::1", True),
        ("[::1]", True),
        ("0:0:0:0:0:0:0:1", True),
        ("[0:0:0:0:0:0:0:1]", True),
        ("[127.0.0.1]", True),  # as written in a bind; Hypercorn strips the brackets
        # Spellings the resolver reads as 127.0.0.1, refused: a wrong "yes" opens a guard.
        ("127.1", False),
        ("127.0.1", False),
        ("0x7f.0.0.1", False),
        ("0177.0.0.1", False),
        ("127.000.0.1", False),
        ("2130706433", False),
        ("localhost.", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.evil.example", False),
        ("evil.example", False),
        ("0.0.0.0", False),
        ("::", False),
        ("[::]", False),
        ("::2", False),
        ("10.0.0.1", False),
        ("[::1", False),
        ("::1]", False),
        ("[[::1]]", False),
        ("[localhost]x", False),
        (" 127.0.0.1", False),
        ("127.0.0.1 ", False),
        ("", False),
        ("[]", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("127.0.0.1:8765", Bind("127.0.0.1", 8765)),
        ("127.0.0.1:0", Bind("127.0.0.1", 0)),
        ("127.0.0.1:65535", Bind("127.0.0.1", 65535)),
        ("127.0.0.1:00080", Bind("127.0.0.1", 80)),
        ("[::1]:8765", Bind("[::1]", 8765)),
        ("[::]:8765", Bind("[::]", 8765)),
        ("[127.0.0.1]:1", Bind("[127.0.0.1]", 1)),
        ("localhost:80", Bind("localhost", 80)),
        ("example.com:443", Bind("example.com", 443)),
        ("0.0.0.0:8765", Bind("0.0.0.0", 8765)),
        ("127.1:8765", Bind("127.1", 8765)),  # parses; it is just not loopback
        ("127.0.0.1:65536", None),
        ("127.0.0.1:99999", None),
        ("127.0.0.1:123456", None),
        ("127.0.0.1:-1", None),
        ("127.0.0.1:http", None),
        ("127.0.0.1: 80", None),
        ("127.0.0.1:80 ", None),
        ("127.0.0.1", None),
        ("8765", None),
        (":8765", None),
        ("::1:8765", None),  # IPv6 needs its brackets
        ("[::1]", None),
        ("[::1:8765", None),
        ("[::1%lo]:80", None),
        ("[localhost]:80", None),
        ("a b:80", None),
        ("unix:/tmp/admin.sock", None),
        ("", None),
    ],
)
def test_bind_addresses(text: str, parsed: Bind | None) -> None:
    assert parse_bind(text) == parsed


@pytest.mark.parametrize(
    ("text", "loopback"),
    [
        ("127.0.0.1:0", True),
        ("[::1]:8765", True),
        ("localhost:1", True),
        ("LOCALHOST:1", True),
        ("127.1:8765", False),
        ("0.0.0.0:8765", False),
        ("[::]:0", False),
        ("example.com:443", False),
        ("::1:8765", False),  # does not parse: never taken for loopback
        ("127.0.0.1", False),
        ("127.0.0.1:99999", False),
    ],
)
def test_bind_is_loopback(text: str, loopback: bool) -> None:
    assert bind_is_loopback(text) is loopback
    parsed = parse_bind(text)
    assert (parsed is not None and parsed.loopback) is loopback
