"""SHA-256-crypt and SHA-512-crypt (``$5$`` and ``$6$``), the password hashes of the
basic authentication file (``common/authentication.py``).

The scheme is Ulrich Drepper's "Unix crypt using SHA-256 and SHA-512", which glibc's
``crypt(3)``, ``openssl passwd -5/-6``, ``mkpasswd -m sha-512`` and Apache Commons
Codec's ``Crypt.crypt`` (what Pulsar's basic provider calls) all implement, so one file
serves Magnetar and Pulsar. Python's ``crypt`` module would do it but is deprecated
(removed in 3.13), hence this pure implementation.

Pure: hashlib only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from typing import Any

_ALPHABET = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
DEFAULT_ROUNDS = 5000
MIN_ROUNDS, MAX_ROUNDS = 1000, 999_999_999
_SALT_MAX = 16
_HASHED = re.compile(r"^\$(?P<id>[56])\$(?:rounds=(?P<rounds>\d+)\$)?(?P<salt>[^$]{0,16})\$(?P<hash>[./0-9A-Za-z]+)$")
_SCHEMES: dict[str, tuple[Callable[..., Any], int]] = {"5": (hashlib.sha256, 32), "6": (hashlib.sha512, 64)}


def _b64(value: int, chars: int) -> str:
    out = []
    for _ in range(chars):
        out.append(_ALPHABET[value & 0x3F])
        value >>= 6
    return "".join(out)


def _encode(digest: bytes, scheme: str) -> str:
    """The digest in crypt's own base64, bytes taken in the scheme's interleaved order."""
    if scheme == "6":
        out = []
        for i in range(21):
            a = (i * 22) % 63
            out.append(_b64((digest[a] << 16) | (digest[(a + 21) % 63] << 8) | digest[(a + 42) % 63], 4))
        out.append(_b64(digest[63], 2))
        return "".join(out)
    out = []
    for i in range(10):
        a = (i * 21) % 30
        out.append(_b64((digest[a] << 16) | (digest[(a + 10) % 30] << 8) | digest[(a + 20) % 30], 4))
    out.append(_b64((digest[31] << 8) | digest[30], 3))
    return "".join(out)


def _repeat(block: bytes, length: int) -> bytes:
    return (block * (length // len(block) + 1))[:length]


def sha_crypt(password: bytes, salt: str, scheme: str = "6", rounds: int | None = None) -> str:
    """``$<scheme>$[rounds=N$]<salt>$<hash>`` of ``password`` (scheme ``"5"``: SHA-256,
    ``"6"``: SHA-512). ``rounds`` None means the default 5000, not written out."""
    new, size = _SCHEMES[scheme]
    salt_bytes = salt.encode()[:_SALT_MAX]
    count = DEFAULT_ROUNDS if rounds is None else min(max(rounds, MIN_ROUNDS), MAX_ROUNDS)
    pw = password

    alternate = new(pw + salt_bytes + pw).digest()
    first = new(pw + salt_bytes)
    first.update(_repeat(alternate, len(pw)))
    length = len(pw)
    while length:
        first.update(alternate if length & 1 else pw)
        length >>= 1
    digest = first.digest()
    p_bytes = _repeat(new(pw * len(pw)).digest(), len(pw))
    s_bytes = _repeat(new(salt_bytes * (16 + digest[0])).digest(), len(salt_bytes))
    for r in range(count):
        step = new()
        step.update(p_bytes if r & 1 else digest)
        if r % 3:
            step.update(s_bytes)
        if r % 7:
            step.update(p_bytes)
        step.update(digest if r & 1 else p_bytes)
        digest = step.digest()
    assert len(digest) == size
    prefix = f"${scheme}$" + ("" if rounds is None else f"rounds={count}$")
    return f"{prefix}{salt_bytes.decode(errors='replace')}${_encode(digest, scheme)}"


def is_sha_crypt(hashed: str) -> bool:
    """Whether ``hashed`` is a ``$5$`` or ``$6$`` hash this module checks."""
    return _HASHED.match(hashed) is not None


def verify(password: bytes, hashed: str) -> bool:
    """Whether ``password`` gives ``hashed`` (compared in constant time).

    Raises:
        ValueError: ``hashed`` is not a ``$5$``/``$6$`` hash.
    """
    match = _HASHED.match(hashed)
    if match is None:
        raise ValueError("not a SHA-crypt ($5$ or $6$) hash")
    rounds = int(match["rounds"]) if match["rounds"] is not None else None
    return hmac.compare_digest(sha_crypt(password, match["salt"], match["id"], rounds).encode(), hashed.encode())


def hash_password(password: str, scheme: str = "6", rounds: int | None = None) -> str:
    """A new ``$6$`` (or ``$5$``) hash of ``password`` with a random 16-character salt."""
    salt = "".join(secrets.choice(_ALPHABET) for _ in range(_SALT_MAX))
    return sha_crypt(password.encode(), salt, scheme, rounds)
