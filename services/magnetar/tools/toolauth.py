"""The credentials the command-line tools present: ``--auth-token``, ``--auth-token-file``
or the ``MAGNETAR_AUTH_TOKEN`` environment variable (in that order); or a basic user,
``--auth-basic-user USER`` with the password in ``--auth-password-file`` or
``MAGNETAR_AUTH_PASSWORD``. (A TLS client certificate, ``--tls-cert-file``, is presented
in the handshake.)"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping

from magnetar.client.auth import AuthenticationBasic, AuthenticationToken
from magnetar.common.authentication import BEARER, basic_header
from magnetar.common.errors import InvalidArgument
from magnetar.common.tokens import read_key_bytes

ENV_VAR = "MAGNETAR_AUTH_TOKEN"
PASSWORD_ENV_VAR = "MAGNETAR_AUTH_PASSWORD"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--auth-token`` / ``--auth-token-file`` (one of them)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--auth-token", metavar="TOKEN",
                       help=f"present this token (default: ${ENV_VAR}); shows in the process list, prefer the file")
    group.add_argument("--auth-token-file", metavar="FILE", help="present the token in FILE")
    group.add_argument("--auth-basic-user", metavar="USER",
                       help=f"present this basic user, its password from --auth-password-file or ${PASSWORD_ENV_VAR}")
    parser.add_argument("--auth-password-file", metavar="FILE", help="the basic user's password (first line of FILE)")


def token(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> str | None:
    """The token to present; None: anonymous.

    Raises:
        InvalidArgument: the token file cannot be read or is empty.
    """
    if getattr(args, "auth_token", None):
        return str(args.auth_token).strip()
    if getattr(args, "auth_token_file", None):
        text = read_key_bytes(args.auth_token_file).decode(errors="replace").strip()
        if not text:
            raise InvalidArgument(f"the token file {args.auth_token_file} is empty")
        return text
    return environ.get(ENV_VAR, "").strip() or None


def token_source(args: argparse.Namespace) -> Callable[[], str] | None:
    """:func:`token` as a token function for a connection pool (None: anonymous)."""
    value = token(args)
    return None if value is None else (lambda: value)


def _basic_password(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    if ":" in args.auth_basic_user:
        raise InvalidArgument("a basic user name has no ':'")
    if getattr(args, "auth_password_file", None):
        text = read_key_bytes(args.auth_password_file).decode(errors="replace")
        password = text.splitlines()[0] if text else ""
    else:
        password = environ.get(PASSWORD_ENV_VAR, "")
    if not password:
        raise InvalidArgument(f"--auth-basic-user needs a password: --auth-password-file FILE or ${PASSWORD_ENV_VAR}")
    return password


def sdk_authentication(
    args: argparse.Namespace, environ: Mapping[str, str] = os.environ
) -> AuthenticationToken | AuthenticationBasic | None:
    """The SDK's ``authentication`` of the flags (None: anonymous).

    Raises:
        InvalidArgument: as :func:`authorization`.
    """
    if getattr(args, "auth_basic_user", None):
        return AuthenticationBasic(args.auth_basic_user, _basic_password(args, environ))
    value = token(args, environ)
    return None if value is None else AuthenticationToken(value)


def authorization(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> str | None:
    """The ``authorization`` header to present (``Bearer …`` or ``Basic …``); None: anonymous.

    Raises:
        InvalidArgument: a token or password file cannot be read or is empty, or a basic
            user without a password.
    """
    if getattr(args, "auth_basic_user", None):
        return basic_header(args.auth_basic_user, _basic_password(args, environ))
    value = token(args, environ)
    return None if value is None else BEARER + value
