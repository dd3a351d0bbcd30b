"""How a client proves who it is, as pulsar-client's classes: :class:`AuthenticationToken`
(a JWT), :class:`AuthenticationBasic` (a user name and password) and
:class:`AuthenticationTLS` (a client certificate; the broker's ``tls`` provider takes
its common name as the role)."""

from __future__ import annotations

from collections.abc import Callable

from magnetar.common.authentication import BEARER, basic_header
from magnetar.common.errors import AuthenticationError, InvalidConfiguration


class AuthenticationToken:
    """A JWT token sent with every call as ``authorization: Bearer <token>``.

    Args:
        token: the token, or a function returning it; the function is called for each
            call and each stream the client opens, so a token that is renewed (read
            again from a file, fetched from a vault) is used as soon as it changes.
            It runs on the client's event loop: it must be quick and must not block.

    Example::

        client = magnetar.Client(url, authentication=magnetar.AuthenticationToken(token))
    """

    def __init__(self, token: str | Callable[[], str]) -> None:
        if isinstance(token, str):
            if not token.strip():
                raise InvalidConfiguration("AuthenticationToken needs a token, got an empty string")
        elif not callable(token):
            raise InvalidConfiguration(f"AuthenticationToken takes a token or a function, got {type(token).__name__}")
        self._token = token

    def token(self) -> str:
        """The token to send now.

        Raises:
            AuthenticationError: the token function failed or gave no token.
        """
        if isinstance(self._token, str):
            return self._token.strip()
        try:
            value = self._token()
        except Exception as exc:
            raise AuthenticationError(f"the token function failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(value, str) or not value.strip():
            raise AuthenticationError("the token function returned no token")
        return value.strip()


class AuthenticationBasic:
    """A user name and password sent with every call as ``authorization: Basic …``
    (the broker's ``basic`` provider; pulsar-client's ``AuthenticationBasic``).

    Example::

        client = magnetar.Client(url, authentication=magnetar.AuthenticationBasic("app-1", password))

    Raises:
        InvalidConfiguration: an empty user name, or one with ``:`` (the header could not carry it).
    """

    def __init__(self, username: str, password: str, method: str = "basic") -> None:
        if not isinstance(username, str) or not username or ":" in username:
            raise InvalidConfiguration("AuthenticationBasic needs a user name without ':'")
        if not isinstance(password, str):
            raise InvalidConfiguration(f"AuthenticationBasic takes a password string, got {type(password).__name__}")
        if method != "basic":
            raise InvalidConfiguration(f"AuthenticationBasic method {method!r} is not supported: use 'basic'")
        self.username = username
        self._header = basic_header(username, password)

    def header(self) -> str:
        """The ``authorization`` header to send."""
        return self._header


class AuthenticationTLS:
    """A client certificate shown in the TLS handshake (the broker's ``tls`` provider
    takes its subject's common name as the role; pulsar-client's ``AuthenticationTLS``).

    The same as the client's ``tls_certificate_file_path`` and
    ``tls_private_key_file_path``, which it may not contradict; TLS must be on (a
    ``+ssl`` URL or ``use_tls``).

    Example::

        client = magnetar.Client("magnetar+ssl://broker:6650", tls_trust_certs_file_path="ca.pem",
                                 authentication=magnetar.AuthenticationTLS("app-1.pem", "app-1.key"))
    """

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        if not certificate_path or not private_key_path:
            raise InvalidConfiguration("AuthenticationTLS needs a certificate file and its private key file")
        self.certificate_path = str(certificate_path)
        self.private_key_path = str(private_key_path)


def authorization_source(authentication: object | None) -> Callable[[], str] | None:
    """The ``authorization`` header function of a client's ``authentication`` argument
    (None: no header: anonymous, or a TLS client certificate).

    Raises:
        InvalidConfiguration: not one of the authentication classes.
    """
    if authentication is None or isinstance(authentication, AuthenticationTLS):
        return None
    if isinstance(authentication, AuthenticationBasic):
        return authentication.header
    if isinstance(authentication, AuthenticationToken):
        token = authentication.token
        return lambda: BEARER + token()
    raise InvalidConfiguration(
        f"unsupported authentication {type(authentication).__name__}: use magnetar.AuthenticationToken, "
        "AuthenticationBasic or AuthenticationTLS"
    )


def tls_identity(
    authentication: object | None, certificate_file_path: str | None, private_key_file_path: str | None
) -> tuple[str | None, str | None]:
    """The client certificate and key to show: an :class:`AuthenticationTLS`'s, else the
    client's TLS options.

    Raises:
        InvalidConfiguration: both name a certificate, and not the same one.
    """
    if not isinstance(authentication, AuthenticationTLS):
        return certificate_file_path, private_key_file_path
    given = (certificate_file_path, private_key_file_path)
    mine = (authentication.certificate_path, authentication.private_key_path)
    if any(given) and given != mine:
        raise InvalidConfiguration(
            "AuthenticationTLS and tls_certificate_file_path/tls_private_key_file_path name different files"
        )
    return mine
