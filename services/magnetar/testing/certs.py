"""A throwaway certificate authority for tests: a CA, server certificates for chosen
names (``127.0.0.1``, ``localhost`` …) and client certificates, written as PEM files.
Nothing is checked in; every test run makes its own.

    ca = TestCa.create(tmp_path / "ca")
    server = ca.issue("broker", ["127.0.0.1", "localhost"])
    client = ca.issue("client", [], client=True)
    ca.cert_file, server.cert_file, server.key_file
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    cert_file: str
    key_file: str


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


class TestCa:
    """A certificate authority whose certificate is ``cert_file`` (what clients and servers trust)."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self.directory = directory
        self._key = key
        self._cert = cert
        self.cert_file = str(directory / "ca.pem")

    @classmethod
    def create(cls, directory: Path, name: str = "Magnetar Test CA") -> TestCa:
        """A new CA in ``directory`` (created), its certificate written to ``ca.pem``."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )  # fmt: skip
        ca = cls(directory, key, cert)
        Path(ca.cert_file).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return ca

    def issue(
        self, name: str, hosts: list[str], *, client: bool = True, server: bool = True, common_name: bool = True
    ) -> Issued:
        """A certificate signed by this CA for common name ``name`` with ``hosts`` (DNS
        names or IP addresses) as subjectAltName, usable as server and/or client
        certificate; written to ``<name>.pem`` and ``<name>.key``. ``common_name=False``:
        the subject names ``name`` as its organization only (no CN)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [u for u, on in ((ExtendedKeyUsageOID.SERVER_AUTH, server), (ExtendedKeyUsageOID.CLIENT_AUTH, client)) if on]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME if common_name else NameOID.ORGANIZATION_NAME, name)]))
            .issuer_name(self._cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )  # fmt: skip
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        issued = Issued(str(self.directory / f"{name}.pem"), str(self.directory / f"{name}.key"))
        Path(issued.cert_file).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        Path(issued.key_file).write_bytes(_key_pem(key))
        return issued
