"""``magnetar tokens``: make keys and tokens, and look into tokens (Pulsar's ``pulsar tokens``).

    magnetar tokens create-secret-key --output my-secret.key
    magnetar tokens create --secret-key my-secret.key --subject app-1 --expiry 30d
    magnetar tokens create-key-pair --algorithm RS256 --output-private-key priv.pem --output-public-key pub.pem
    magnetar tokens create --private-key priv.pem --algorithm RS256 --subject app-1
    magnetar tokens show TOKEN                 # header and claims, nothing checked
    magnetar tokens validate TOKEN --secret-key my-secret.key   # prints the subject
    magnetar tokens create-basic-user --user app-1 >> users.htpasswd   # password on stdin

Key options take a path, ``file:///path`` or ``data:;base64,<key>``. Errors are one line
on stderr and exit 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import base64
import getpass
import os
import sys

from cryptography.hazmat.primitives.asymmetric import ec

from magnetar.common import shacrypt, tokens
from magnetar.common.errors import InvalidArgument, MagnetarError

PROG = "magnetar tokens"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Create keys and JWT tokens; show and validate tokens.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("create-secret-key", help="a random secret key for HS256 (raw bytes; --base64 for text)")
    p.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (mode 600) instead of stdout")
    p.add_argument("-e", "--base64", action="store_true", help="base64 text instead of raw bytes")
    p.add_argument("-a", "--algorithm", default="HS256", choices=tokens.HMAC_ALGORITHMS, help="default HS256")

    p = sub.add_parser("create-key-pair", help="a private and public key (PEM) for RS256 or ES256 tokens")
    p.add_argument("-a", "--algorithm", default="RS256", choices=tokens.KEY_PAIR_ALGORITHMS, help="default RS256")
    p.add_argument("--output-private-key", required=True, metavar="FILE", help="where the private key goes (mode 600)")
    p.add_argument("--output-public-key", required=True, metavar="FILE", help="where the public key goes")

    p = sub.add_parser("create", help="a token for a role, signed with a secret key or a private key")
    p.add_argument("-s", "--subject", required=True, metavar="ROLE", help="the role the token names")
    p.add_argument("-e", "--expiry", "--expiry-time", dest="expiry", metavar="DURATION",
                   help="valid this long: 30s, 30m, 1h, 7d, 2w, 1y (default: no expiry)")
    key = p.add_mutually_exclusive_group(required=True)
    key.add_argument("--secret-key", metavar="FILE", help="sign with this secret key (HS algorithms)")
    key.add_argument("--private-key", metavar="FILE", help="sign with this private key (RS, ES algorithms)")
    p.add_argument("-a", "--algorithm", help="default HS256 with --secret-key; with --private-key, RS256 for an "
                   "RSA key and ES256/384/512 for an EC key")

    p = sub.add_parser("show", help="print a token's header and claims (without validating it)")
    _token_arguments(p)

    p = sub.add_parser("validate", help="check a token's signature and expiry; print its subject")
    _token_arguments(p)
    key = p.add_mutually_exclusive_group(required=True)
    key.add_argument("--secret-key", metavar="FILE", help="the secret key (HS algorithms)")
    key.add_argument("--public-key", metavar="FILE", help="the public key (RS, ES algorithms)")
    p.add_argument("-a", "--algorithm", help="the algorithm to accept (default: HS256 with --secret-key; "
                   "with --public-key, RS256 for an RSA key and ES256/384/512 for an EC key)")

    p = sub.add_parser("create-basic-user", help="a user:hash line of the basic provider's password file "
                       "(SHA-512-crypt); the password is read from stdin, or asked for on a terminal")
    p.add_argument("-u", "--user", required=True, metavar="NAME", help="the user name (the role)")
    return parser


def _read_password() -> str:
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise InvalidArgument("the passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise InvalidArgument("the password is empty")
    return password


def _token_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("token", nargs="?", metavar="TOKEN", help="the token (or --token-file, or stdin with -)")
    p.add_argument("-f", "--token-file", metavar="FILE", help="read the token from FILE")


def _write(path: str, data: bytes, private: bool) -> None:
    """Write ``data`` to ``path``; keys that must stay secret are created mode 600."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {path}: {exc.strerror or exc}") from exc


def _read_token(args: argparse.Namespace) -> str:
    if args.token_file:
        text = tokens.read_key_bytes(args.token_file).decode(errors="replace")
    elif args.token in (None, "-"):
        if args.token is None and sys.stdin.isatty():
            raise UsageError("give a TOKEN, --token-file FILE, or - to read it from stdin")
        text = sys.stdin.read()
    else:
        text = args.token
    token = text.strip()
    if not token:
        raise InvalidArgument("the token is empty")
    return token


def _algorithm_of(key: object, given: str | None) -> str:
    """The algorithm given, or the usual one for a loaded private or public key."""
    if given:
        return tokens.check_algorithm(given)
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return {256: "ES256", 384: "ES384", 521: "ES512"}.get(key.curve.key_size, "ES256")
    return "RS256"


class UsageError(Exception):
    """Bad command-line input found after argparse (exit 2)."""


def run(args: argparse.Namespace) -> None:
    if args.command == "create-secret-key":
        key = tokens.generate_secret_key(args.algorithm)
        data = base64.b64encode(key) + b"\n" if args.base64 else key
        if args.output:
            _write(args.output, data, private=True)
        elif not args.base64 and sys.stdout.isatty():
            raise UsageError("a raw key is binary: use --output FILE, or --base64 to print it")
        else:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
    elif args.command == "create-key-pair":
        private_pem, public_pem = tokens.generate_key_pair(args.algorithm)
        _write(args.output_private_key, private_pem, private=True)
        _write(args.output_public_key, public_pem, private=False)
    elif args.command == "create":
        seconds = tokens.parse_duration(args.expiry) if args.expiry else None
        if args.secret_key:
            signing_key: object = tokens.load_secret_key(args.secret_key)
            algorithm = tokens.check_algorithm(args.algorithm or "HS256")
        else:
            signing_key = tokens.load_private_key(args.private_key)
            algorithm = _algorithm_of(signing_key, args.algorithm)
        print(tokens.create_token(args.subject, signing_key, algorithm, expires_in_s=seconds))
    elif args.command == "show":
        print(tokens.describe(*tokens.parse_unverified(_read_token(args))))
    elif args.command == "validate":
        token = _read_token(args)
        if args.secret_key:
            authenticator = tokens.TokenAuthenticator(
                tokens.check_algorithm(args.algorithm or "HS256"), tokens.load_secret_key(args.secret_key)
            )
        else:
            public_key = tokens.load_public_key(args.public_key)
            authenticator = tokens.TokenAuthenticator(_algorithm_of(public_key, args.algorithm), public_key)
        print(authenticator.authenticate(token))
    elif args.command == "create-basic-user":
        if not args.user or ":" in args.user or args.user != args.user.strip():
            raise InvalidArgument("a user name is not empty, has no ':' and no surrounding spaces")
        print(f"{args.user}:{shacrypt.hash_password(_read_password())}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except MagnetarError as exc:
        print(f"{PROG}: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
