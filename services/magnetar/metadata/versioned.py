"""Versioned read-modify-write of a JSON document: compare-and-set, retried on conflict."""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Callable
from typing import Any, Protocol

from magnetar.common.errors import MetadataVersionConflict, NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.nodes import NodeStat

Document = dict[str, Any]


class _Store(Protocol):
    async def get(self, path: str) -> tuple[bytes, NodeStat]: ...

    async def set(self, path: str, data: bytes, version: int = -1) -> NodeStat: ...

    async def create(self, path: str, data: bytes = b"", *, makepath: bool = True) -> str: ...


async def read_modify_write(
    session: _Store,
    path: str,
    fn: Callable[[Document | None], Document],
    max_attempts: int = 10,
) -> tuple[Document, int]:
    """Apply ``fn`` to the document at ``path`` and write the result with a version check.

    ``fn`` receives a private copy of the current document, or None when the znode does
    not exist (then the result is created, parents included). When another writer got
    there first, the document is read again and ``fn`` applied again, so ``fn`` must be a
    pure function of its argument; an exception from ``fn`` aborts with nothing written.
    If ``fn`` returns the document unchanged, nothing is written.

    Returns:
        The document as written and its znode version.

    Raises:
        MetadataVersionConflict: still conflicting after ``max_attempts`` attempts.
        CorruptMetadata: the znode does not hold a JSON object.
    """
    for attempt in range(max_attempts):
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
            # Lost the race (changed, created or deleted meanwhile): back off with jitter
            # so that contending writers do not collide again in lockstep.
            await asyncio.sleep(random.uniform(0, min(0.1, 0.002 * 2**attempt)))
    raise MetadataVersionConflict(
        f"znode {path} kept changing under {max_attempts} read-modify-write attempts"
    )
