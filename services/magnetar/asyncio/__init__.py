"""``magnetar.asyncio``: the asyncio client, with the same API as ``magnetar`` but async methods."""

from magnetar import exceptions
from magnetar.client import aio
from magnetar.client.aio import *  # noqa: F403 - the SDK's names, listed in aio.__all__
from magnetar.exceptions import *  # noqa: F403 - the public errors, listed in exceptions.__all__

__all__: list[str] = []
__all__ += aio.__all__
__all__ += exceptions.__all__
