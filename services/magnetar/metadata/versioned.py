"""Versioned read-modify-write of a JSON document: compare-and-set, retried on conflict."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from magnetar.common.errors import MetadataVersionConflict, NotFound
from magnetar.common.retry import RetryPolicy
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.nodes import NodeStat

Document = dict[str, Any]

# After a lost race, wait 2 ms doubling to 100 ms, with full jitter, so that contending
# writers do not collide again in lockstep.
CONFLICT_RETRY = RetryPolicy(max_tries=10, delay_s=0.002, multiplier=2.0, max_delay_s=0.1, jitter=1.0)


class _Store(Protocol):
    async def get(self, path: str) -> tuple[bytes, NodeStat]: ...

    async def set(self, path: str, data: bytes, version: int = -1) -> NodeStat: ...

    async def create(self, path: str, data: bytes = b"", *, makepath: bool = True) -> str: ...


async def read_modify_write(
    session: _Store,
    path: str,
    fn: Callable[[Document | None], Document],
    max_attempts: int | None = None,
    retry: RetryPolicy = CONFLICT_RETRY,
) -> tuple[Document, int]:
    """Apply ``fn`` to the document at ``path`` and write the result with a version check.

    ``fn`` receives a private copy of the current document, or None when the znode does
    not exist (then the result is created, parents included). When another writer got
    there first, the document is read again and ``fn`` applied again, so ``fn`` must be a
    pure function of its argument; an exception from ``fn`` aborts with nothing written.
    If ``fn`` returns the document unchanged, nothing is written.

    Args:
        session: the versioned store.
        path: the znode.
        fn: the pure update.
        max_attempts: tries before giving up (default: ``retry.max_tries``).
        retry: the waits between tries (:data:`CONFLICT_RETRY`).

    Returns:
        The document as written and its znode version.

    Raises:
        MetadataVersionConflict: still conflicting after ``max_attempts`` attempts.
        CorruptMetadata: the znode does not hold a JSON object.
    """
    if max_attempts is not None:
        retry = replace(retry, max_tries=max_attempts)
    attempts = retry.attempts()
    async for _ in attempts:
        try:
            data, stat = await session.get(path)
        except NotFound:
            current, version = None, None
        else:
            current, version = decode(data, path), stat.version
        updated = fn(copy.deepcopy(current))
        try:
            if version is None:
                await session.create(path, encode(updated), makepath=True)
                return updated, 0
            if updated == current:
                return updated, version
            stat = await session.set(path, encode(updated), version=version)
            return updated, stat.version
        except (MetadataVersionConflict, NotFound):
            continue  # lost the race (changed, created or deleted meanwhile): try again
    raise MetadataVersionConflict(
        f"znode {path} kept changing under {attempts.tries} read-modify-write attempts"
    )
