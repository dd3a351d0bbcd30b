"""The token the command-line tools present: ``--auth-token``, ``--auth-token-file`` or
the ``MAGNETAR_AUTH_TOKEN`` environment variable (in that order)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping

from magnetar.common.errors import InvalidArgument
from magnetar.common.tokens import read_key_bytes

ENV_VAR = "MAGNETAR_AUTH_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--auth-token`` / ``--auth-token-file`` (one of them)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--auth-token", metavar="TOKEN",
                       help=f"present this token (default: ${ENV_VAR}); shows in the process list, prefer the file")
    group.add_argument("--auth-token-file", metavar="FILE", help="present the token in FILE")


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
