"""Certificates made at run time for mutual-TLS tests: a CA, a server certificate for
127.0.0.1, client certificates, all with the ``cryptography`` package (nothing is
checked in, nothing expires between runs). EC P-256 keys: fast to make."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@attrs.frozen
class Issued:
    """One certificate and its key, as PEM text."""

    cert: str
    key: str

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert.write_text(self.cert)
        key.write_text(self.key)
        key.chmod(0o600)
        return cert, key


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    return pem.decode()


_CA_USAGE = x509.KeyUsage(
    digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
    key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
)  # fmt: skip


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


@attrs.frozen
class Authority:
    """A CA that issues server and client certificates."""

    cert: str
    _key: ec.EllipticCurvePrivateKey = attrs.field(alias="key")
    _name: x509.Name = attrs.field(alias="name")

    @classmethod
    def make(cls, common: str = "mcp-supervisor test CA") -> Authority:
        key = _key()
        name = _name(common)
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert.public_bytes(serialization.Encoding.PEM).decode(), key, name)

    def issue(self, common: str, *, server: bool, password: bytes | None = None) -> Issued:
        """A leaf certificate: for 127.0.0.1 (``server``) or a client identity."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if server:
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return Issued(cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key, password))


@attrs.frozen
class MutualTls:
    """Everything one mutual-TLS test needs, written under ``directory``."""

    directory: Path
    ca: Authority
    server: Issued
    client: Issued

    @classmethod
    def make(cls, directory: Path) -> MutualTls:
        ca = Authority.make()
        server, client = ca.issue("127.0.0.1", server=True), ca.issue("mcp-supervisor", server=False)
        made = cls(directory, ca, server, client)
        (directory / "ca.crt").write_text(ca.cert)
        made.server.write(directory, "server")
        made.client.write(directory, "client")
        return made

    def hypercorn(self, config: Any) -> None:
        """Make a Hypercorn config serve https with our server certificate and require
        a client certificate our CA signed (a ``configure`` for ``serve_loopback``)."""
        config.certfile = str(self.directory / "server.crt")
        config.keyfile = str(self.directory / "server.key")
        config.ca_certs = str(self.directory / "ca.crt")
        config.verify_mode = ssl.CERT_REQUIRED

    def server_context(self) -> ssl.SSLContext:
        """What the loopback server uses: its certificate, and client certificates required."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=self.ca.cert)
        ctx.load_cert_chain(self.directory / "server.crt", self.directory / "server.key")
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx
