"""TLS settings without a network: service URLs, the SDK's TLS options, the services'
TLS keys, PEM files, and the test CA's certificates."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from cryptography import x509

import magnetar
from magnetar.bookie.config import BookieConfig
from magnetar.broker.config import BrokerConfig
from magnetar.client.connection import ConnectionPool, parse_service_url, sdk_tls, url_uses_tls
from magnetar.common.errors import InvalidArgument, NotConnected, TlsHandshakeFailed
from magnetar.common.tls import (
    ClientTls,
    ServerTls,
    add_tls_flags,
    client_tls,
    is_handshake_refused,
    read_pem,
    server_tls,
    tls_from_flags,
)
from magnetar.gateway.config import GatewayConfig
from magnetar.gateway.server import https_options
from magnetar.testing.certs import TestCa


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCa:
    return TestCa.create(tmp_path_factory.mktemp("ca"))


@pytest.mark.parametrize(("url", "hosts", "tls"), [
    ("magnetar+ssl://h1:6651,h2", ["h1:6651", "h2:6660"], True),
    ("pulsar+ssl://127.0.0.1:6650/", ["127.0.0.1:6650"], True),
    ("magnetar://h:1", ["h:1"], False),
    ("pulsar://h", ["h:6660"], False),
    ("h:7", ["h:7"], False),
])
def test_ssl_service_urls(url: str, hosts: list[str], tls: bool) -> None:
    assert parse_service_url(url) == hosts
    assert url_uses_tls(url) is tls


def test_other_schemes_are_refused_naming_the_tls_one() -> None:
    with pytest.raises(InvalidArgument, match=r"magnetar\+ssl://"):
        parse_service_url("https://h:6650")


def test_sdk_tls_is_on_with_an_ssl_url_or_use_tls_only() -> None:
    assert sdk_tls("magnetar://h", trust_certs_file_path="ca.pem") is None
    assert sdk_tls("magnetar://h", use_tls=True, trust_certs_file_path="ca.pem") == ClientTls("ca.pem")
    assert sdk_tls(
        "pulsar+ssl://h", trust_certs_file_path="ca.pem", certificate_file_path="c.pem", private_key_file_path="c.key"
    ) == ClientTls("ca.pem", "c.pem", "c.key")
    assert sdk_tls("magnetar+ssl://h") == ClientTls()  # the system's roots


def test_checks_grpc_cannot_skip_are_refused_clearly() -> None:
    with pytest.raises(InvalidArgument, match="tls_allow_insecure_connection is not supported"):
        magnetar.Client("magnetar+ssl://127.0.0.1:1", tls_allow_insecure_connection=True)
    with pytest.raises(InvalidArgument, match="tls_validate_hostname=False is not supported"):
        sdk_tls("magnetar+ssl://h", validate_hostname=False)
    # Without TLS the TLS options count for nothing, as in pulsar-client.
    assert sdk_tls("magnetar://h", allow_insecure_connection=True, validate_hostname=False) is None


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(InvalidArgument, match="both"):
        sdk_tls("magnetar+ssl://h", certificate_file_path="c.pem")


def test_unreadable_trust_file_fails_when_the_client_is_made(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="cannot read the TLS trust certificates file"):
        ConnectionPool("magnetar+ssl://127.0.0.1:1", tls=ClientTls(str(tmp_path / "missing.pem")))
    not_pem = tmp_path / "x.pem"
    not_pem.write_text("hello")
    with pytest.raises(InvalidArgument, match="not a PEM file"):
        read_pem(str(not_pem), "trust certificates file")


def test_service_tls_keys_default_off_and_are_checked() -> None:
    config = BrokerConfig.load()
    assert (config.tls_enabled, config.tls_client_enabled, config.tls_require_client_cert) == (False, False, False)
    assert server_tls(config) is None and client_tls(config) is None
    assert "tls_client_enabled" not in BookieConfig.model_fields  # a bookie calls no one
    with pytest.raises(InvalidArgument, match="tls_enabled needs tls_cert_file and tls_key_file"):
        BookieConfig.load(tls_enabled=True, tls_cert_file="b.pem")
    with pytest.raises(InvalidArgument, match="tls_require_client_cert needs tls_trust_certs_file"):
        BookieConfig.load(tls_require_client_cert=True)


def test_service_tls_settings_from_config() -> None:
    config = BrokerConfig.load(
        tls_enabled=True, tls_cert_file="b.pem", tls_key_file="b.key", tls_trust_certs_file="ca.pem",
        tls_require_client_cert=True, tls_client_enabled=True,
    )
    assert server_tls(config) == ServerTls("b.pem", "b.key", "ca.pem", True)
    assert client_tls(config) == ClientTls("ca.pem", "b.pem", "b.key")


def test_the_tls_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAGNETAR_GATEWAY_TLS_CLIENT_ENABLED", "true")
    monkeypatch.setenv("MAGNETAR_GATEWAY_TLS_TRUST_CERTS_FILE", "/ca.pem")
    assert client_tls(GatewayConfig.load()) == ClientTls("/ca.pem")


def test_gateway_https_options(ca: TestCa) -> None:
    assert https_options(GatewayConfig.load()) == {}
    server = ca.issue("gw", ["127.0.0.1"])
    options = https_options(GatewayConfig.load(
        tls_enabled=True, tls_cert_file=server.cert_file, tls_key_file=server.key_file,
        tls_trust_certs_file=ca.cert_file, tls_require_client_cert=True,
    ))
    assert options["ssl_certfile"] == server.cert_file and options["ssl_ca_certs"] == ca.cert_file
    assert options["ssl_cert_reqs"] == 2  # ssl.CERT_REQUIRED
    with pytest.raises(InvalidArgument, match="cannot read the TLS key file"):
        https_options(GatewayConfig.load(tls_enabled=True, tls_cert_file=server.cert_file, tls_key_file="/nope"))


def test_cli_flags() -> None:
    parser = argparse.ArgumentParser()
    add_tls_flags(parser)
    assert tls_from_flags(parser.parse_args([])) is None
    assert tls_from_flags(parser.parse_args([]), "magnetar+ssl://h") == ClientTls()
    args = parser.parse_args(["--tls-trust-certs-file", "ca.pem", "--tls-cert-file", "c", "--tls-key-file", "k"])
    assert tls_from_flags(args) == ClientTls("ca.pem", "c", "k")


@pytest.mark.parametrize(("details", "refused"), [
    ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Tls handshake failed "
     "(TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED", True),
    ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Custom verification check failed "
     "with error: UNAUTHENTICATED: Hostname Verification Check failed.", True),
    ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: "
     "Connection refused", False),
    ("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:1: Socket closed", False),
])
def test_refused_handshakes_are_told_from_lost_connections(details: str, refused: bool) -> None:
    assert is_handshake_refused(details) is refused


def test_a_refused_handshake_is_not_retried() -> None:
    assert isinstance(TlsHandshakeFailed("x"), NotConnected) and not TlsHandshakeFailed.retriable
    assert magnetar.TlsHandshakeFailed is TlsHandshakeFailed


def test_test_ca_issues_server_and_client_certificates(ca: TestCa) -> None:
    issued = ca.issue("srv", ["127.0.0.1", "localhost"])
    cert = x509.load_pem_x509_certificate(Path(issued.cert_file).read_bytes())
    root = x509.load_pem_x509_certificate(Path(ca.cert_file).read_bytes())
    cert.verify_directly_issued_by(root)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert b"PRIVATE KEY" in Path(issued.key_file).read_bytes()


def test_services_pass_their_client_tls_where_channels_are_made(tmp_path: Path, ca: TestCa) -> None:
    from magnetar.broker.rpc.remote_moves import RemoteMovePublisher
    from magnetar.ledger.bookie_client import BookiePool

    tls = ClientTls(ca.cert_file)
    assert RemoteMovePublisher("127.0.0.1:6650", tls=tls)._pool.tls == tls
    assert BookiePool(tls=tls).tls == tls
    assert ConnectionPool("magnetar://127.0.0.1:6650").tls is None


def test_standalone_turns_tls_on_for_every_component() -> None:
    from magnetar.tools.standalone import _tls_env, build_parser

    assert _tls_env(build_parser().parse_args([])) == {}
    env = _tls_env(build_parser().parse_args(
        ["--tls-cert-file", "n.pem", "--tls-key-file", "n.key", "--tls-trust-certs-file", "ca.pem"]
    ))
    for service in ("BOOKIE", "BROKER", "AUDITOR", "GATEWAY"):
        assert env[f"MAGNETAR_{service}_TLS_ENABLED"] == "true"
        assert env[f"MAGNETAR_{service}_TLS_TRUST_CERTS_FILE"] == "ca.pem"
    assert "MAGNETAR_BOOKIE_TLS_CLIENT_ENABLED" not in env and env["MAGNETAR_BROKER_TLS_CLIENT_ENABLED"] == "true"


def test_https_context_names_a_file_it_cannot_load(tmp_path: Path) -> None:
    from magnetar.common.tls import https_context

    with pytest.raises(InvalidArgument, match="cannot load the TLS files"):
        https_context(ClientTls(str(tmp_path / "missing.pem")))
