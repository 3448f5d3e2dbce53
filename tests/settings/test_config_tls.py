"""A remote server's ``tls`` block (mutual TLS) in the config: paths and ``${file:…}``
PEM alike, in every dialect; every bad value a located ``config error`` naming the
field; the private key a secret (masked in ``repr``, ``check`` and error texts)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from actors.spec import ServerSpec
from actors.tls import ClientTls, TlsProblem
from actors.transport_errors import TransportError
from actors.transports.http_link import new_client
from supervisor.settings.loader import ConfigError, describe_config, load_config
from tests.settings.test_config_loader import fail, load
from tests.support.tls_certs import Authority, MutualTls

URL = "https://mcp.example/mcp"
TLS = "$.servers.docs.tls"
KEY, CERT, CA = f"{TLS}.key", f"{TLS}.cert", f"{TLS}.ca"


@pytest.fixture
def certs(tmp_path: Path) -> MutualTls:
    return MutualTls.make(tmp_path)


def remote(tls: Any, url: str = URL, **more: Any) -> dict[str, Any]:
    return {"servers": {"docs": {"url": url, "tls": tls, **more}}}


def loaded(tmp_path: Path, doc: dict[str, Any], environ: dict[str, str] | None = None) -> ServerSpec:
    (spec,) = load(tmp_path, doc, environ).servers
    return spec


def test_paths_relative_to_the_config_file_are_read_as_pem(tmp_path: Path, certs: MutualTls) -> None:
    spec = loaded(tmp_path, remote({"cert": "client.crt", "key": "client.key", "ca": "ca.crt"}))
    pems = (certs.client.cert, certs.client.key, certs.ca.cert)
    assert spec.tls == ClientTls(*(pem.rstrip("\n") for pem in pems))  # read as ${file:} reads
    assert certs.client.key.rstrip("\n") in spec.secrets
    assert describe_config(load(tmp_path, remote({"ca": str(tmp_path / "ca.crt")}))) == [
        f"docs [remote] {URL} (enabled, lazy, shared, untrusted, tls ca)"
    ]


@pytest.mark.parametrize("section", ["servers", "mcpServers", "mcp"])
def test_file_references_give_the_same_and_every_dialect_takes_tls(
    tmp_path: Path, certs: MutualTls, section: str
) -> None:
    tls = {"cert": "${file:client.crt}", "key": "${file:client.key}", "ca": "${env:TLS_CA}"}
    entry: dict[str, Any] = {"url": URL, "tls": tls}
    if section == "mcp":
        entry["type"] = "remote"
    spec = loaded(tmp_path, {section: {"docs": entry}}, {"TLS_CA": certs.ca.cert})
    assert spec.tls == ClientTls(certs.client.cert.rstrip("\n"), certs.client.key.rstrip("\n"), certs.ca.cert)
    assert (
        "mutual tls" in describe_config(load(tmp_path, {section: {"docs": entry}}, {"TLS_CA": "ca.crt"}))[0]
    )


def test_the_key_never_shows_in_repr_check_or_errors(tmp_path: Path, certs: MutualTls) -> None:
    """Planted secret: the key's PEM lines appear in no repr, ``check`` line or error."""
    body = [line for line in certs.client.key.splitlines() if not line.startswith("-----")]
    spec = loaded(tmp_path, remote({"cert": "client.crt", "key": certs.client.key}))
    other = Authority.make().issue("x", server=False)
    mismatch = fail(tmp_path, remote({"cert": other.cert, "key": certs.client.key}))
    described = describe_config(load(tmp_path, remote({"key": "client.key", "cert": "client.crt"})))
    shown = [repr(spec), repr(spec.tls), *described, str(mismatch)]
    assert "key=<hidden>" in repr(spec)
    for text in shown:
        assert not any(line in text for line in body), text


@pytest.mark.parametrize(
    ("tls", "json_path", "words"),
    [
        ({"cert": "client.crt", "key": "gone.key"}, KEY, '"gone.key" cannot be read (No such file'),
        ({"cert": "client.crt", "key": "stranger.key"}, KEY, "does not match the certificate"),
        ({"cert": "client.crt", "key": "locked.key"}, KEY, "is encrypted"),
        ({"cert": "client.crt"}, KEY, "needs both 'cert' and 'key'"),
        ({"key": "client.key"}, CERT, "needs both 'cert' and 'key'"),
        ({"cert": "client.key", "key": "client.key"}, CERT, "not a usable PEM certificate"),
        ({"cert": "client.crt", "key": "client.crt"}, KEY, "not a usable PEM private key"),
        ({"ca": "client.key"}, CA, "not a usable PEM CA certificate"),
        ({"ca": "notes.txt"}, CA, "notes.txt holds no PEM text"),
        ({"ca": "${file:notes.txt}"}, CA, "the reference did not give PEM text"),
        ({"ca": ""}, CA, "the value is empty"),
        ({"ca": 7}, CA, "expected a file path or PEM text, got 7"),
        ({"crt": "client.crt"}, TLS, "unknown key 'crt'"),
        ({}, TLS, "the block is empty"),
        ("ca.crt", TLS, "expected an object like"),
    ],
)  # fmt: skip
def test_a_bad_tls_block_names_the_field(
    tmp_path: Path, certs: MutualTls, tls: Any, json_path: str, words: str
) -> None:
    Authority.make().issue("x", server=False).write(tmp_path, "stranger")
    (tmp_path / "locked.key").write_text(Authority.make().issue("y", server=False, password=b"pw").key)
    (tmp_path / "notes.txt").write_text("not a certificate\n")
    error = fail(tmp_path, remote(tls))
    assert error.json_path == json_path, error
    assert words in error.problem, error


def test_tls_needs_an_https_remote_server(tmp_path: Path, certs: MutualTls) -> None:
    plain = fail(tmp_path, remote({"ca": "ca.crt"}, url="http://127.0.0.1:9/mcp"))
    assert (plain.json_path, plain.problem) == (
        TLS,
        "'tls' applies to https:// urls only, this is http://; use https:// or remove 'tls'",
    )
    local = fail(tmp_path, {"servers": {"docs": {"command": "true", "tls": {"ca": "ca.crt"}}}})
    assert local.json_path == TLS and "does not apply to a local server" in local.problem


def test_a_hand_built_spec_with_a_broken_block_is_a_transport_error(certs: MutualTls) -> None:
    spec = ServerSpec(name="docs", type="remote", url=URL, tls=ClientTls(cert=certs.client.cert))
    with pytest.raises(TransportError, match=r"mcp server docs: tls\.key: a client certificate needs both"):
        new_client(spec)


def test_config_errors_keep_the_contract(tmp_path: Path, certs: MutualTls) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(remote({"ca": "missing.crt"})))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    missing = os.path.join(str(tmp_path), "missing.crt")
    assert str(caught.value) == (
        f'config error: {path}: $.servers.docs.tls.ca: "missing.crt" cannot be read '
        f"(No such file or directory: {missing}); create it or remove the reference"
    )


def test_without_memfd_the_pem_goes_through_a_private_file_removed_at_once(
    certs: MutualTls, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made = tmp_path / "temp"
    made.mkdir()
    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(made))
    ClientTls(certs.client.cert, certs.client.key, certs.ca.cert).context()
    assert list(made.iterdir()) == []
    with pytest.raises(TlsProblem, match="does not match"):
        ClientTls(certs.client.cert, Authority.make().issue("x", server=False).key).context()
    assert list(made.iterdir()) == []
