"""Translation of kazoo exceptions into Magnetar's error tree (the only place that does it).

Three metadata-specific classes live here until they join ``common/errors.py``:
``NodeExists`` (a create lost a race: a compare-and-set against "absent", hence a
version conflict), ``MetadataTooLarge`` (a request over ZooKeeper's size limit) and
``CorruptMetadata`` (a znode does not hold the expected JSON).
"""

from __future__ import annotations

from typing import ClassVar

from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
    ZookeeperError,
)

from magnetar.common.errors import (
    InvalidArgument,
    MagnetarError,
    MetadataError,
    MetadataVersionConflict,
    NotFound,
)


class NodeExists(MetadataVersionConflict):
    """A znode that was to be created exists already."""

    code: ClassVar[str] = "METADATA_NODE_EXISTS"


class MetadataTooLarge(InvalidArgument):
    """A ZooKeeper request would exceed the server's ``jute.maxbuffer``: it is refused
    before it is sent (ZooKeeper would drop the whole session over it) and nothing is
    written."""

    code: ClassVar[str] = "METADATA_TOO_LARGE"


class CorruptMetadata(MetadataError):
    """A znode's data is not the JSON document it should be."""

    code: ClassVar[str] = "METADATA_CORRUPT"
    retriable: ClassVar[bool] = False


_CONNECTION_ERRORS = (
    ConnectionLoss,
    ConnectionClosedError,
    SessionExpiredError,
    OperationTimeoutError,
)


def is_connection_error(exc: BaseException) -> bool:
    """True for kazoo errors that mean "not connected right now" (retry may succeed)."""
    return isinstance(exc, _CONNECTION_ERRORS)


def translate(exc: BaseException, op: str, path: str) -> MagnetarError:
    """The Magnetar error for a failed ZooKeeper operation ``op`` on ``path``."""
    if isinstance(exc, MagnetarError):
        return exc
    if isinstance(exc, NoNodeError):
        return NotFound(f"znode {path} does not exist")
    if isinstance(exc, NodeExistsError):
        return NodeExists(f"znode {path} already exists")
    if isinstance(exc, BadVersionError):
        return MetadataVersionConflict(
            f"znode {path} was changed by someone else since it was read (version conflict)"
        )
    if isinstance(exc, NotEmptyError):
        return MetadataError(f"cannot {op} znode {path}: it has children")
    if isinstance(exc, _CONNECTION_ERRORS):
        return MetadataError(
            f"ZooKeeper {op} of {path} failed: {type(exc).__name__} "
            "(connection to ZooKeeper lost; retry once it is back)"
        )
    if isinstance(exc, (KazooException, ZookeeperError)):
        return MetadataError(f"ZooKeeper {op} of {path} failed: {type(exc).__name__}: {exc}")
    if isinstance(exc, (ValueError, TypeError)):
        return InvalidArgument(f"bad ZooKeeper {op} of {path}: {exc}")
    return MetadataError(f"ZooKeeper {op} of {path} failed: {type(exc).__name__}: {exc}")
