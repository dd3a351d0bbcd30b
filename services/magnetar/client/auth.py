"""How a client proves who it is: :class:`AuthenticationToken` (pulsar-client's)."""

from __future__ import annotations

from collections.abc import Callable

from magnetar.common.errors import AuthenticationError, InvalidArgument


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
                raise InvalidArgument("AuthenticationToken needs a token, got an empty string")
        elif not callable(token):
            raise InvalidArgument(f"AuthenticationToken takes a token or a function, got {type(token).__name__}")
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


def token_source(authentication: object | None) -> Callable[[], str] | None:
    """The token function of a client's ``authentication`` argument (None: anonymous).

    Raises:
        InvalidArgument: not an :class:`AuthenticationToken`.
    """
    if authentication is None:
        return None
    if not isinstance(authentication, AuthenticationToken):
        raise InvalidArgument(
            f"unsupported authentication {type(authentication).__name__}: use magnetar.AuthenticationToken"
        )
    return authentication.token
