"""read_modify_write against an in-memory versioned store (conflicts injected)."""

from __future__ import annotations

from typing import Any

import pytest

from magnetar.common.errors import MetadataVersionConflict, NotFound
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import NodeExists
from magnetar.metadata.nodes import NodeStat
from magnetar.metadata.versioned import read_modify_write


def _stat(version: int) -> NodeStat:
    return NodeStat(version, 0, 0, 0, 0, 0)


class MemoryStore:
    """Versioned compare-and-set like ZooKeeper; ``interfere`` bumps the node before a write."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.interfere = 0
        self.writes = 0

    async def get(self, path: str) -> tuple[bytes, NodeStat]:
        if path not in self.nodes:
            raise NotFound(path)
        data, version = self.nodes[path]
        return data, _stat(version)

    def _maybe_interfere(self, path: str) -> None:
        if self.interfere:
            self.interfere -= 1
            data, version = self.nodes.get(path, (encode({"n": 100}), -1))
            self.nodes[path] = (data, version + 1)

    async def set(self, path: str, data: bytes, version: int = -1) -> NodeStat:
        self._maybe_interfere(path)
        if path not in self.nodes:
            raise NotFound(path)
        if version != -1 and self.nodes[path][1] != version:
            raise MetadataVersionConflict(path)
        self.writes += 1
        self.nodes[path] = (data, self.nodes[path][1] + 1)
        return _stat(self.nodes[path][1])

    async def create(self, path: str, data: bytes = b"", *, makepath: bool = True) -> str:
        self._maybe_interfere(path)
        if path in self.nodes:
            raise NodeExists(path)
        self.writes += 1
        self.nodes[path] = (data, 0)
        return path


def bump(doc: dict[str, Any] | None) -> dict[str, Any]:
    return {"n": (doc or {}).get("n", 0) + 1}


async def test_creates_then_updates() -> None:
    store = MemoryStore()
    assert await read_modify_write(store, "/c", bump) == ({"n": 1}, 0)
    assert await read_modify_write(store, "/c", bump) == ({"n": 2}, 1)
    assert decode(store.nodes["/c"][0]) == {"n": 2}


async def test_retries_after_conflicts_and_reapplies_fn() -> None:
    store = MemoryStore()
    await read_modify_write(store, "/c", bump)
    store.interfere = 3
    seen: list[dict[str, Any] | None] = []

    def fn(doc: dict[str, Any] | None) -> dict[str, Any]:
        seen.append(doc)
        return bump(doc)

    doc, version = await read_modify_write(store, "/c", fn)
    assert len(seen) == 4 and doc == {"n": 2} and version == 4


async def test_create_race_is_retried_as_update() -> None:
    store = MemoryStore()
    store.interfere = 1  # somebody creates the node between our get and create
    doc, _ = await read_modify_write(store, "/new", bump)
    assert doc == {"n": 101}


async def test_gives_up_after_max_attempts() -> None:
    store = MemoryStore()
    await read_modify_write(store, "/c", bump)
    store.interfere = 1000
    with pytest.raises(MetadataVersionConflict, match="3 read-modify-write attempts"):
        await read_modify_write(store, "/c", bump, max_attempts=3)


async def test_unchanged_document_is_not_written_and_fn_gets_a_copy() -> None:
    store = MemoryStore()
    await read_modify_write(store, "/c", lambda _: {"n": 1, "list": [1]})
    writes = store.writes

    def mutate_then_keep(doc: dict[str, Any] | None) -> dict[str, Any]:
        assert doc is not None
        doc["list"].append(2)  # must not leak into anything but the result
        doc["list"].pop()
        return doc

    assert await read_modify_write(store, "/c", mutate_then_keep) == ({"n": 1, "list": [1]}, 0)
    assert store.writes == writes


async def test_exception_in_fn_aborts_without_writing() -> None:
    store = MemoryStore()

    def refuse(_: dict[str, Any] | None) -> dict[str, Any]:
        raise ValueError("no")

    with pytest.raises(ValueError):
        await read_modify_write(store, "/c", refuse)
    assert store.nodes == {}
