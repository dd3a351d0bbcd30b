"""JWT token authentication as Pulsar's: who a caller is, from a signed bearer token.

A token is a JWT whose subject (``sub``) is the caller's *role*. Servers verify it with
one configured algorithm and key: HS256/384/512 with a secret key shared by the token
issuer and the servers, or RS256/384/512 and ES256/384/512 with a key pair (tokens are
signed with the private key; servers hold only the public key). ``exp`` is honoured when
present (Pulsar's tokens may have none). A token that names another algorithm than the
configured one (``alg: none`` included) is refused before its signature is looked at.

Key files as Pulsar writes them: a secret key is raw bytes or their base64 text
(``create-secret-key --base64``); a key pair is PEM (DER, Pulsar's own output, is read
too). Key settings also take Pulsar's URL forms ``file:///path`` and ``data:;base64,...``.

Pure: no gRPC, no environment; the servers' interceptor is in ``common/grpcauth.py``.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from magnetar.common.errors import AuthenticationError, InvalidArgument

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")
ALGORITHMS = HMAC_ALGORITHMS + RSA_ALGORITHMS + EC_ALGORITHMS
KEY_PAIR_ALGORITHMS = RSA_ALGORITHMS + EC_ALGORITHMS
_EC_CURVES: dict[str, ec.EllipticCurve] = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}
_SECRET_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdwy])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_BASE64 = re.compile(rb"^[A-Za-z0-9+/]+={0,2}$")


def check_algorithm(algorithm: str) -> str:
    """``algorithm`` upper-cased if Magnetar supports it.

    Raises:
        InvalidArgument: ``none`` or an unknown name.
    """
    name = algorithm.strip().upper()
    if name not in ALGORITHMS:
        raise InvalidArgument(f"unsupported token algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    return name


def parse_duration(text: str) -> int:
    """``"30s"``, ``"30m"``, ``"1h"``, ``"7d"``, ``"2w"``, ``"1y"`` → seconds (Pulsar's
    ``--expiry-time`` units).

    Raises:
        InvalidArgument: another form, or zero.
    """
    match = _DURATION.match(text)
    try:
        number = int(match.group(1)) if match else 0
    except ValueError:  # more digits than int() converts
        number = 0
    if number == 0 or match is None:
        raise InvalidArgument(f"bad duration {text[:80]!r}: write a positive number and a unit, such as 30m, 1h, 7d, 1y")
    return number * _UNIT_S[match.group(2)]


# -- keys ---------------------------------------------------------------------------


def check_secret_key(key: bytes | str, algorithm: str) -> bytes:
    """``key`` as bytes if it is long enough for ``algorithm`` (RFC 7518: at least the
    hash's size, 32 bytes for HS256); a short passphrase would be guessed offline.

    Raises:
        InvalidArgument: too short.
    """
    data = key.encode() if isinstance(key, str) else key
    need = _SECRET_BYTES[algorithm]
    if len(data) < need:
        raise InvalidArgument(
            f"the secret key is {len(data)} bytes; {algorithm} needs at least {need}: "
            "make one with magnetar tokens create-secret-key"
        )
    return data


def read_key_bytes(source: str | Path) -> bytes:
    """The bytes a key setting names: a path, ``file:///path`` or ``data:;base64,...``.

    Raises:
        InvalidArgument: the file cannot be read, or the data URL is malformed.
    """
    text = str(source).strip()
    if text.startswith("data:"):
        meta, sep, payload = text[5:].partition(",")
        if not sep:
            raise InvalidArgument("a data: key is written data:;base64,<key>")
        if meta.endswith(";base64"):
            try:
                return base64.b64decode(payload, validate=True)
            except ValueError as exc:  # binascii.Error, or a character that is not ASCII
                raise InvalidArgument("the data: key is not valid base64") from exc
        return payload.encode()
    path = Path(text[len("file://") :] if text.startswith("file://") else text)
    try:
        return path.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise InvalidArgument(f"cannot read key file {path}: {getattr(exc, 'strerror', None) or exc}") from exc


def decode_secret_key(data: bytes) -> bytes:
    """A secret key from a key file's content: the base64 text ``create-secret-key
    --base64`` writes (at least 32 bytes once decoded) is decoded; anything else is the
    raw key."""
    text = data.strip()
    if text and len(text) % 4 == 0 and _BASE64.match(text):
        decoded = base64.b64decode(text)
        if len(decoded) >= 32:
            return decoded
    return data


def load_secret_key(source: str | Path) -> bytes:
    """Read a secret key (see :func:`read_key_bytes` and :func:`decode_secret_key`).

    Raises:
        InvalidArgument: unreadable or empty.
    """
    key = decode_secret_key(read_key_bytes(source))
    if not key:
        raise InvalidArgument(f"the secret key {source} is empty")
    return key


def _load_key(source: str | Path, what: str, *loaders: Any) -> Any:
    data = read_key_bytes(source)
    for loader in loaders:
        try:
            return loader(data)
        except (ValueError, TypeError):
            continue
    raise InvalidArgument(f"{source} is not {what} (PEM or DER)")


def load_private_key(source: str | Path) -> Any:
    """A private key, PEM or DER (PKCS#8).

    Raises:
        InvalidArgument: unreadable, or not a private key.
    """
    return _load_key(
        source, "an unencrypted private key",
        lambda d: serialization.load_pem_private_key(d, password=None),
        lambda d: serialization.load_der_private_key(d, password=None),
    )


def load_public_key(source: str | Path) -> Any:
    """A public key, PEM or DER (X.509 SubjectPublicKeyInfo).

    Raises:
        InvalidArgument: unreadable, or not a public key.
    """
    return _load_key(source, "a public key", serialization.load_pem_public_key, serialization.load_der_public_key)


def generate_secret_key(algorithm: str = "HS256") -> bytes:
    """Random bytes as long as ``algorithm``'s hash (32 for HS256)."""
    algorithm = check_algorithm(algorithm)
    if algorithm not in HMAC_ALGORITHMS:
        raise InvalidArgument(f"{algorithm} signs with a key pair, not a secret key")
    return secrets.token_bytes(_SECRET_BYTES[algorithm])


def generate_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """A new ``(private_pem, public_pem)`` for ``algorithm`` (RSA 2048 bits, or the
    ES algorithm's curve)."""
    algorithm = check_algorithm(algorithm)
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm in RSA_ALGORITHMS:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm in EC_ALGORITHMS:
        private = ec.generate_private_key(_EC_CURVES[algorithm])
    else:
        raise InvalidArgument(f"{algorithm} signs with a secret key, not a key pair")
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem


# -- tokens -------------------------------------------------------------------------


def create_token(
    subject: str,
    key: Any,
    algorithm: str = "HS256",
    expires_in_s: float | None = None,
    claims: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> str:
    """A signed token for the role ``subject``.

    Args:
        key: the secret key (bytes) for HS algorithms, the private key otherwise.
        expires_in_s: seconds until ``exp``; None: no ``exp`` (as Pulsar's default).
        claims: more claims to put in.
        now: the current time (tests).

    Raises:
        InvalidArgument: an empty subject, or a key that does not fit the algorithm.
    """
    algorithm = check_algorithm(algorithm)
    if not subject:
        raise InvalidArgument("a token needs a subject (the role)")
    if algorithm in HMAC_ALGORITHMS:
        if not isinstance(key, bytes | str):
            raise InvalidArgument(f"{algorithm} signs with a secret key, not a {type(key).__name__}")
        key = check_secret_key(key, algorithm)
    payload: dict[str, Any] = {**(claims or {}), "sub": subject}
    if expires_in_s is not None:
        payload["exp"] = int((time.time() if now is None else now) + expires_in_s)
    try:
        return jwt.encode(payload, key, algorithm=algorithm)
    except (jwt.exceptions.PyJWTError, ValueError, TypeError, AttributeError) as exc:
        raise InvalidArgument(f"cannot sign a {algorithm} token with that key: {exc}") from exc


def parse_unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(header, claims)`` of a token, without checking anything (``tokens show``).

    Raises:
        InvalidArgument: not a JWT.
    """
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.exceptions.PyJWTError as exc:
        raise InvalidArgument(f"not a JWT token: {exc}") from exc
    return dict(header), dict(claims)


class TokenAuthenticator:
    """Verifies tokens with one algorithm and key; :meth:`authenticate` gives the role.

    Args:
        algorithm: the only algorithm accepted (HS256 …).
        key: the secret key (HS) or the public key (RS, ES): bytes, or a loaded key.
        leeway_s: clock skew allowed on ``exp`` (Pulsar's default 0).
    """

    def __init__(self, algorithm: str, key: Any, leeway_s: float = 0.0) -> None:
        self.algorithm = check_algorithm(algorithm)
        if self.algorithm in HMAC_ALGORITHMS:
            if not isinstance(key, bytes | str):
                raise InvalidArgument(f"{self.algorithm} needs a secret key, not a {type(key).__name__}")
            key = check_secret_key(key, self.algorithm)
        if self.algorithm in KEY_PAIR_ALGORITHMS and isinstance(key, bytes | str):
            key = serialization.load_pem_public_key(key.encode() if isinstance(key, str) else key)
        self._key = key
        self.leeway_s = leeway_s

    @classmethod
    def from_settings(
        cls, algorithm: str, secret_key: str = "", public_key: str = "", leeway_s: float = 0.0
    ) -> TokenAuthenticator:
        """The authenticator of a service's config: a secret key for HS algorithms, a
        public key for the others.

        Raises:
            InvalidArgument: the key the algorithm needs is not set, or cannot be read.
        """
        algorithm = check_algorithm(algorithm)
        if algorithm in HMAC_ALGORITHMS:
            if not secret_key:
                raise InvalidArgument(f"token authentication with {algorithm} needs token_secret_key_file")
            return cls(algorithm, load_secret_key(secret_key), leeway_s)
        if not public_key:
            raise InvalidArgument(f"token authentication with {algorithm} needs token_public_key_file")
        return cls(algorithm, load_public_key(public_key), leeway_s)

    def authenticate(self, token: str | None) -> str:
        """The role (``sub``) of a valid token.

        Raises:
            AuthenticationError: no token, a malformed one, another algorithm than the
                configured one, a bad signature, an expired token, or no subject. The
                message never contains the token.
        """
        if not token:
            raise AuthenticationError("authentication required: no token was presented")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.exceptions.PyJWTError:
            raise AuthenticationError("the token is malformed (not a JWT)") from None
        alg = header.get("alg")
        if alg != self.algorithm:
            raise AuthenticationError(f"the token is signed with {alg!r}; only {self.algorithm} is accepted")
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=[self.algorithm],
                leeway=self.leeway_s,
                options={"require": ["sub"], "verify_aud": False},
            )
        except jwt.exceptions.ExpiredSignatureError:
            raise AuthenticationError("the token has expired") from None
        except jwt.exceptions.InvalidSignatureError:
            raise AuthenticationError("the token's signature does not verify with the configured key") from None
        except jwt.exceptions.MissingRequiredClaimError:
            raise AuthenticationError("the token has no subject (sub): it names no role") from None
        except jwt.exceptions.PyJWTError as exc:
            raise AuthenticationError(f"the token is invalid: {type(exc).__name__}") from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError("the token's subject (sub) is not a role name")
        return subject


def describe(header: Mapping[str, Any], claims: Mapping[str, Any]) -> str:
    """A token's header and claims as ``tokens show`` prints them (Pulsar's layout)."""
    return json.dumps(dict(header), sort_keys=True) + "\n---\n" + json.dumps(dict(claims), sort_keys=True)
