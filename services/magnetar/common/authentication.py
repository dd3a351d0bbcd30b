"""Who a caller is, whatever door it came in by: Pulsar's authentication providers
(``token``, ``basic``, ``tls``) and its anonymous role, behind one
:class:`AuthenticationService`.

A door (the gRPC interceptor, the gateway's middleware, the Pulsar protocol listener)
reports what it saw of its caller as :class:`Credentials` (the ``Authorization`` header
it read, the peer's verified TLS certificate, or nothing) and gets a role or an
:class:`~magnetar.common.errors.AuthenticationError` back:

- ``token``: a JWT bearer token; the role is its subject (``common/tokens.py``).
- ``basic``: ``user:password`` checked against a password file of ``user:hash`` lines
  (Pulsar's ``basicAuthConf``); the role is the user name. Hashes are SHA-512-crypt or
  SHA-256-crypt (``$6$``/``$5$``, ``common/shacrypt.py``).
- ``tls``: the role is the common name (CN) of the client certificate the door's TLS
  layer verified (Pulsar's ``AuthenticationProviderTls``).
- a caller that presents nothing is the ``anonymous_user_role`` when one is configured
  (Pulsar's ``anonymousUserRole``), and refused otherwise. Credentials that fail are
  refused even then: a wrong password must not quietly become the anonymous role.

Pure: no gRPC, no HTTP, no environment.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from magnetar.common import shacrypt
from magnetar.common.errors import AuthenticationError, InvalidArgument
from magnetar.common.tokens import TokenAuthenticator, parse_unverified, read_key_bytes

PROVIDERS = ("token", "basic", "tls")
"""The providers' names, as Pulsar's ``getAuthMethodName()`` gives them."""
BEARER = "Bearer "
BASIC = "Basic "
NO_TOKEN = "authentication required: no token was presented"


@dataclass(frozen=True)
class Credentials:
    """What a door saw of its caller.

    Attributes:
        authorization: the ``Authorization`` header's value (``Bearer <token>``,
            ``Basic <base64 of user:password>``), or None.
        certificate: the client certificate the door's TLS layer verified (PEM or DER),
            or None (no TLS, or no certificate).
    """

    authorization: str | None = None
    certificate: bytes | None = None

    @classmethod
    def of_token(cls, token: str | None, certificate: bytes | None = None) -> Credentials:
        """Credentials of a bare token (the WebSocket ``token`` parameter)."""
        return cls(None if token is None else BEARER + token, certificate)

    @classmethod
    def of_method(cls, method: str, data: bytes, certificate: bytes | None = None) -> Credentials:
        """Credentials of a Pulsar client's authentication method and data (the binary
        protocol's CONNECT ``auth_method_name`` and ``auth_data``): ``token`` (the JWT),
        ``basic`` (``user:password``), ``tls`` or none (the certificate, or nothing).

        Raises:
            AuthenticationError: another method, or data that is not UTF-8 text.
        """
        name = (method or "none").strip().lower()
        if name in ("none", "tls"):
            return cls(None, certificate)
        try:
            text = data.decode("utf-8", "strict")
        except UnicodeDecodeError:
            raise AuthenticationError(f"the {name} credentials are not UTF-8 text") from None
        if name == "token":
            return cls(BEARER + text.strip(), certificate)
        if name == "basic":
            user, sep, password = text.partition(":")
            if not sep or not user:
                raise AuthenticationError("the basic credentials are malformed (no user:password)")
            return cls(basic_header(user, password), certificate)
        raise AuthenticationError(f"authentication method {method!r} is not accepted: use {', '.join(PROVIDERS)}")


def basic_header(user: str, password: str) -> str:
    """``Basic <base64 of user:password>`` (RFC 7617, UTF-8)."""
    return BASIC + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def parse_basic(value: str) -> tuple[str, str]:
    """``(user, password)`` of a ``Basic`` header's value (without the scheme).

    Raises:
        AuthenticationError: not base64, not UTF-8, or no ``:``.
    """
    try:
        text = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise AuthenticationError("the basic credentials are malformed (not base64 of user:password)") from None
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise AuthenticationError("the basic credentials are malformed (no user:password)")
    return user, password


def certificate_role(certificate: bytes) -> str:
    """The role of a client certificate: its subject's common name (CN), as Pulsar's
    TLS provider takes it.

    Raises:
        AuthenticationError: unreadable, or a subject without a CN.
    """
    try:
        cert = (x509.load_pem_x509_certificate if certificate.lstrip().startswith(b"-----")
                else x509.load_der_x509_certificate)(certificate)
    except ValueError:
        raise AuthenticationError("the client certificate cannot be read") from None
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    role = names[0].value if names else ""
    if not isinstance(role, str) or not role.strip():
        raise AuthenticationError("the client certificate's subject has no common name (CN): it names no role")
    return role.strip()


class BasicAuthenticator:
    """Checks ``user:password`` against a password file (Pulsar's ``basicAuthConf``).

    The file has one ``user:hash`` line per user (blank lines and ``#`` comments are
    skipped); a hash is ``$6$...`` (SHA-512-crypt) or ``$5$...`` (SHA-256-crypt), as
    ``openssl passwd -6`` and ``magnetar tokens create-basic-user`` write. A verified
    password is remembered (as a keyed digest, never in clear) so that a client's
    further calls cost microseconds instead of the hash's 5,000 rounds.

    Args:
        users: user name → hash.

    Raises:
        InvalidArgument: a hash of another scheme (MD5, APR1, DES crypt and bcrypt are
            refused: the first three are weak, bcrypt is not available here).
    """

    _CACHE_SIZE = 1024

    def __init__(self, users: Mapping[str, str]) -> None:
        for user, hashed in users.items():
            if not shacrypt.is_sha_crypt(hashed):
                scheme = hashed.split("$")[1] if hashed.startswith("$") and hashed.count("$") > 1 else "crypt"
                raise InvalidArgument(
                    f"basic authentication: the hash of user {user!r} is not SHA-512-crypt or SHA-256-crypt "
                    f"($6$/$5$; found {scheme!r}): write it with `openssl passwd -6` or "
                    "`magnetar tokens create-basic-user`"
                )
        self._users = dict(users)
        self._pepper = secrets.token_bytes(32)
        self._verified: OrderedDict[bytes, str] = OrderedDict()

    @classmethod
    def from_file(cls, source: str | Path) -> BasicAuthenticator:
        """Read a password file: a path, ``file:///path`` or ``data:;base64,...``.

        Raises:
            InvalidArgument: unreadable, a line that is not ``user:hash``, a user named
                twice, or an unsupported hash.
        """
        text = read_key_bytes(source).decode("utf-8", errors="replace")
        users: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, hashed = line.partition(":")
            if not sep or not user or not hashed:
                raise InvalidArgument(f"basic authentication file {source}: line {number} is not user:hash")
            if user in users:
                raise InvalidArgument(f"basic authentication file {source}: user {user!r} is named twice")
            users[user] = hashed.strip()
        if not users:
            raise InvalidArgument(f"basic authentication file {source} names no user")
        return cls(users)

    def _key(self, user: str, password: str) -> bytes:
        return hmac.new(self._pepper, f"{user}\0{password}".encode(), hashlib.sha256).digest()

    def remembers(self, user: str, password: str) -> bool:
        """Whether ``password`` was verified for ``user`` before (checking it again costs
        microseconds, not the hash's rounds)."""
        hashed = self._users.get(user)
        return hashed is not None and self._verified.get(self._key(user, password)) == hashed

    def authenticate(self, user: str, password: str) -> str:
        """The role (the user name) if ``password`` is the user's.

        Raises:
            AuthenticationError: an unknown user or a wrong password (one message for
                both, so a caller cannot probe for user names).
        """
        hashed = self._users.get(user)
        key = self._key(user, password)
        if hashed is not None and self._verified.get(key) == hashed:
            self._verified.move_to_end(key)
            return user
        if hashed is None or not shacrypt.verify(password.encode(), hashed):
            raise AuthenticationError("the user name or password is wrong")
        self._verified[key] = hashed
        if len(self._verified) > self._CACHE_SIZE:
            self._verified.popitem(last=False)
        return user


class AuthenticationService:
    """The enabled providers and the anonymous role of one door's service (Pulsar's
    ``AuthenticationService``).

    Args:
        token: the token provider (None: not enabled).
        basic: the basic provider (None: not enabled).
        tls: whether the ``tls`` provider is enabled.
        anonymous_user_role: the role of callers that present nothing ("": refused).
    """

    def __init__(
        self,
        token: TokenAuthenticator | None = None,
        basic: BasicAuthenticator | None = None,
        tls: bool = False,
        anonymous_user_role: str = "",
    ) -> None:
        self.token = token
        self.basic = basic
        self.tls = tls
        self.anonymous_user_role = anonymous_user_role.strip()
        self.methods = tuple(n for n, on in zip(PROVIDERS, (token is not None, basic is not None, tls), strict=True) if on)

    @classmethod
    def from_settings(
        cls,
        providers: Collection[str],
        *,
        token_algorithm: str = "HS256",
        token_secret_key: str = "",
        token_public_key: str = "",
        basic_auth_conf: str = "",
        anonymous_user_role: str = "",
    ) -> AuthenticationService:
        """The service of a config's settings.

        Raises:
            InvalidArgument: an unknown provider, none at all, or a provider whose key or
                password file is missing or bad.
        """
        names = [p.strip().lower() for p in providers]
        unknown = sorted(set(names) - set(PROVIDERS))
        if unknown:
            raise InvalidArgument(f"unknown authentication provider(s) {unknown}: use {', '.join(PROVIDERS)}")
        if not names:
            raise InvalidArgument(f"authentication_providers is empty: enable at least one of {', '.join(PROVIDERS)}")
        token = None
        if "token" in names:
            token = TokenAuthenticator.from_settings(token_algorithm, token_secret_key, token_public_key)
        basic = None
        if "basic" in names:
            if not basic_auth_conf:
                raise InvalidArgument("the basic authentication provider needs basic_auth_conf (the password file)")
            basic = BasicAuthenticator.from_file(basic_auth_conf)
        return cls(token, basic, "tls" in names, anonymous_user_role)

    def _nothing_presented(self) -> str:
        if self.methods == ("token",):
            return NO_TOKEN
        return f"authentication required: no credentials were presented (accepted: {', '.join(self.methods)})"

    def is_costly(self, credentials: Credentials) -> bool:
        """Whether :meth:`authenticate` would hash a password (about 9 ms of CPU): an async
        door runs it in a thread then, so a burst of new or wrong passwords does not stall
        its event loop in one block."""
        header = (credentials.authorization or "").strip()
        if self.basic is None or header[:len(BASIC)].lower() != BASIC.lower():
            return False
        try:
            return not self.basic.remembers(*parse_basic(header[len(BASIC):]))
        except AuthenticationError:
            return False  # malformed: refused at once

    def authenticate(self, credentials: Credentials) -> str:
        """The caller's role.

        A ``Bearer`` header goes to the token provider, a ``Basic`` one to the basic
        provider; without a usable header, a verified client certificate goes to the TLS
        provider; a caller that presented nothing at all is the anonymous role.

        Raises:
            AuthenticationError: the credentials fail their provider, their provider is
                not enabled, or nothing was presented and there is no anonymous role.
                The message never contains the credentials.
        """
        header = (credentials.authorization or "").strip()
        if header.startswith(BEARER.strip()) and self.token is not None:
            return self.token.authenticate(header[len(BEARER):].strip() or None)
        if header[:len(BASIC)].lower() == BASIC.lower() and self.basic is not None:
            return self.basic.authenticate(*parse_basic(header[len(BASIC):]))
        if credentials.certificate is not None and self.tls:
            return certificate_role(credentials.certificate)
        if not header and self.anonymous_user_role:
            return self.anonymous_user_role
        raise AuthenticationError(self._nothing_presented())


    def expires_at(self, credentials: Credentials) -> float | None:
        """When credentials :meth:`authenticate` accepted stop being valid (a token's
        ``exp``, seconds since the epoch); None: never (no ``exp``, a password, a
        certificate, the anonymous role)."""
        header = (credentials.authorization or "").strip()
        if self.token is None or not header.startswith(BEARER.strip()):
            return None
        try:
            _, claims = parse_unverified(header[len(BEARER):].strip())
        except InvalidArgument:
            return None
        exp = claims.get("exp")
        return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def as_service(authenticator: AuthenticationService | TokenAuthenticator) -> AuthenticationService:
    """An authentication service; a bare token authenticator is the token provider alone."""
    if isinstance(authenticator, TokenAuthenticator):
        return AuthenticationService(token=authenticator)
    return authenticator
