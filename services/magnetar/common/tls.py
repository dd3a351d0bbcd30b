"""TLS for every port: the settings of a TLS server and of a TLS client, the gRPC
credentials and channels built from them (PEM files read once per settings), an SSL
context for HTTPS clients, and the command-line tools' TLS flags.

A port carries TLS or plain text, never both: a service with ``tls_enabled`` listens
with TLS on its usual port (one port per service keeps every address in ZooKeeper valid
whichever way it is configured). The one exception is the broker's Pulsar protocol door,
which follows Pulsar: ``pulsar://`` on one port, ``pulsar+ssl://`` on a second
(:func:`server_ssl_context`), both advertised.

gRPC always verifies the server's certificate chain and its host name (the name or IP
address the channel dials must be in the certificate's subjectAltName); there is no
switch in grpc-python to skip either, so Magnetar offers none (see docs/security.md).
"""

from __future__ import annotations

import argparse
import functools
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from magnetar.common.errors import InvalidArgument

if TYPE_CHECKING:
    from magnetar.common.config import ServiceConfig

Options = Sequence[tuple[str, Any]]


@dataclass(frozen=True)
class ClientTls:
    """How to call a TLS port: whom to trust and, for mTLS, which certificate to show.

    Attributes:
        trust_certs_file: PEM bundle of the CAs that sign the servers' certificates
            ("": the system's roots).
        cert_file, key_file: this client's certificate chain and private key, for
            servers that require client certificates ("": none).
        target_name_override: check the server's certificate for this name instead of
            the dialled host (tests only: gRPC's ``grpc.ssl_target_name_override``).
    """

    trust_certs_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    target_name_override: str = ""

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise InvalidArgument("a client certificate needs both its certificate file and its key file")


@dataclass(frozen=True)
class ServerTls:
    """How a server listens with TLS.

    Attributes:
        cert_file, key_file: the server's certificate chain and private key (PEM).
        trust_certs_file: the CAs client certificates must chain to (mTLS).
        require_client_cert: refuse a client without a certificate signed by them.
    """

    cert_file: str
    key_file: str
    trust_certs_file: str = ""
    require_client_cert: bool = False

    def __post_init__(self) -> None:
        if not self.cert_file or not self.key_file:
            raise InvalidArgument("TLS is enabled: set tls_cert_file and tls_key_file")
        if self.require_client_cert and not self.trust_certs_file:
            raise InvalidArgument("tls_require_client_cert needs tls_trust_certs_file (the CA of client certificates)")


def server_tls(config: ServiceConfig) -> ServerTls | None:
    """The server side of ``config`` (None: plain text)."""
    if not config.tls_enabled:
        return None
    return ServerTls(config.tls_cert_file, config.tls_key_file, config.tls_trust_certs_file,
                     config.tls_require_client_cert)  # fmt: skip


class _CallerConfig(Protocol):
    tls_client_enabled: bool
    tls_trust_certs_file: str
    tls_cert_file: str
    tls_key_file: str


def client_tls(config: _CallerConfig) -> ClientTls | None:
    """What ``config``'s service uses to call other services (None: plain text): the
    trust file, and its own certificate and key as client certificate when it has them."""
    if not config.tls_client_enabled:
        return None
    return ClientTls(config.tls_trust_certs_file, config.tls_cert_file, config.tls_key_file)


def add_tls_flags(parser: argparse.ArgumentParser) -> None:
    """The command-line tools' TLS flags (``--tls``, ``--tls-trust-certs-file`` …)."""
    parser.add_argument("--tls", action="store_true", help="call the services with TLS (also on with a +ssl URL)")
    parser.add_argument("--tls-trust-certs-file", dest="tls_trust_certs_file", default="",
                        help="PEM file of the CAs that sign the services' certificates (implies --tls)")
    parser.add_argument("--tls-cert-file", dest="tls_cert_file", default="",
                        help="PEM client certificate, for services that require one (mTLS)")
    parser.add_argument("--tls-key-file", dest="tls_key_file", default="", help="PEM key of --tls-cert-file")


def tls_from_flags(args: argparse.Namespace, url: str = "") -> ClientTls | None:
    """The TLS settings of :func:`add_tls_flags`'s flags; None (plain text) unless
    ``--tls``, ``--tls-trust-certs-file`` or a ``+ssl://`` ``url`` asks for TLS."""
    if not (args.tls or args.tls_trust_certs_file or "+ssl://" in url):
        return None
    return ClientTls(args.tls_trust_certs_file, args.tls_cert_file, args.tls_key_file)


def https_context(tls: ClientTls) -> ssl.SSLContext:
    """A client SSL context trusting ``tls``'s CAs (default: the system's), showing its
    client certificate if it has one, and checking the host name.

    Raises:
        InvalidArgument: a file cannot be read or is not a certificate or key.
    """
    try:
        context = ssl.create_default_context(cafile=tls.trust_certs_file or None)
        if tls.cert_file:
            context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"cannot load the TLS files {tls.trust_certs_file!r}, {tls.cert_file!r}: {exc}") from exc
    return context


def server_ssl_context(tls: ServerTls) -> ssl.SSLContext:
    """A server SSL context (for asyncio servers) with ``tls``'s certificate and key,
    asking for a client certificate signed by its CAs when it has a trust file and
    refusing a client without one when it requires client certificates (as the gRPC
    credentials of :func:`server_credentials`).

    Raises:
        InvalidArgument: a file cannot be read or is not a certificate or key.
    """
    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=tls.trust_certs_file or None)
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"cannot load the TLS files {tls.cert_file!r}, {tls.key_file!r}, {tls.trust_certs_file!r}: {exc}") from exc
    if tls.require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
    elif tls.trust_certs_file:
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def read_pem(path: str, what: str) -> bytes:
    """The bytes of a PEM file.

    Raises:
        InvalidArgument: it cannot be read or holds no PEM block.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the TLS {what} {path!r}: {exc.strerror or exc}") from exc
    if b"-----BEGIN " not in data:
        raise InvalidArgument(f"the TLS {what} {path!r} is not a PEM file")
    return data


@functools.lru_cache(maxsize=64)
def channel_credentials(tls: ClientTls) -> grpc.ChannelCredentials:
    """gRPC channel credentials for ``tls`` (its files read on the first call only)."""
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem(tls.trust_certs_file, "trust certificates file") if tls.trust_certs_file else None,
        private_key=read_pem(tls.key_file, "client key file") if tls.key_file else None,
        certificate_chain=read_pem(tls.cert_file, "client certificate file") if tls.cert_file else None,
    )


@functools.lru_cache(maxsize=16)
def server_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    """gRPC server credentials for ``tls`` (its files read on the first call only)."""
    trust = read_pem(tls.trust_certs_file, "trust certificates file") if tls.trust_certs_file else None
    return grpc.ssl_server_credentials(
        [(read_pem(tls.key_file, "key file"), read_pem(tls.cert_file, "certificate file"))],
        root_certificates=trust,
        require_client_auth=tls.require_client_cert,
    )


def _options(tls: ClientTls, options: Options) -> list[tuple[str, Any]]:
    extra = [("grpc.ssl_target_name_override", tls.target_name_override)] if tls.target_name_override else []
    return [*options, *extra]


def aio_channel(address: str, tls: ClientTls | None, options: Options = ()) -> grpc.aio.Channel:
    """An asyncio channel to ``address``: TLS with ``tls``, plain text without."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, channel_credentials(tls), options=_options(tls, options))


def sync_channel(address: str, tls: ClientTls | None, options: Options = ()) -> grpc.Channel:
    """A blocking channel to ``address``: TLS with ``tls``, plain text without."""
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, channel_credentials(tls), options=_options(tls, options))


def add_port(server: grpc.aio.Server, address: str, tls: ServerTls | None) -> int:
    """Listen on ``address`` with TLS (``tls``) or plain text; the port bound, 0 if none."""
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, server_credentials(tls))


# How gRPC's client reports a server certificate it refused (an untrusted chain; a host
# name not in the certificate). Only these verdicts count: a handshake cut short (a server
# stopping) must stay a retriable lost connection. A server refusing this client's
# certificate (mTLS) only closes the socket, which reads like any lost connection too.
_HANDSHAKE_REFUSED = ("certificate_verify_failed", "hostname verification check failed")


def is_handshake_refused(details: str) -> bool:
    """Whether a failed call's details tell of a TLS handshake this client refused."""
    text = details.lower()
    return any(mark in text for mark in _HANDSHAKE_REFUSED)
