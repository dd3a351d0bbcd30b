"""Cursor writes grouped into ZooKeeper multi-operations (metadata/grouped_sets.py)."""

from __future__ import annotations

import asyncio

from magnetar.common.errors import MetadataVersionConflict, NotFound, Timeout
from magnetar.metadata.codec import decode
from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
from magnetar.metadata.nodes import NodeStat, Op
from magnetar.metadata.paths import ZkPaths


def stat(version: int) -> NodeStat:
    return NodeStat(version=version, ephemeral_owner=0, num_children=0, data_length=0, ctime_ms=0, mtime_ms=0,
                    children_version=0)  # fmt: skip


class Session:
    """Znodes in a dict, compare-and-set as ZooKeeper's; multi-operations all or nothing."""

    def __init__(self) -> None:
        self.paths = ZkPaths("/t")
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.calls: list[tuple[str, int]] = []  # ("set", 1) or ("multi", number of ops)
        self.fail_with: Exception | None = None

    def _check(self, path: str, version: int) -> None:
        if path not in self.nodes:
            raise NotFound(f"no node {path}")
        if self.nodes[path][1] != version:
            raise MetadataVersionConflict(f"{path} is not at version {version}")

    async def set(self, path: str, data: bytes, version: int = -1) -> NodeStat:
        self.calls.append(("set", 1))
        await asyncio.sleep(0)
        if self.fail_with is not None:
            raise self.fail_with
        self._check(path, version)
        self.nodes[path] = (data, version + 1)
        return stat(version + 1)

    async def multi(self, ops: list[Op]) -> list[object]:
        self.calls.append(("multi", len(ops)))
        await asyncio.sleep(0)
        if self.fail_with is not None:
            raise self.fail_with
        for op in ops:
            self._check(op.path, op.version)
        for op in ops:
            self.nodes[op.path] = (op.data, op.version + 1)
        return [stat(op.version + 1) for op in ops]


def cursors(session: Session, n: int) -> list[str]:
    paths = [session.paths.cursor("t", "ns", f"topic-{i}", "sub") for i in range(n)]
    for p in paths:
        session.nodes[p] = (b"{}", 0)
    return paths


async def test_cursor_writes_made_in_one_turn_are_one_multi_operation():
    session = Session()
    store = ZkManagedLedgerStore(session)  # type: ignore[arg-type]
    paths = cursors(session, 50)
    versions = await asyncio.gather(*(
        store.put_cursor("t", "ns", f"topic-{i}", "sub", {"mark_delete": [1, i]}, 0) for i in range(50)))
    assert versions == [1] * 50
    assert session.calls == [("multi", 50)]
    assert [decode(session.nodes[p][0])["mark_delete"] for p in paths] == [[1, i] for i in range(50)]


async def test_a_conflict_fails_only_its_own_write_and_the_others_are_stored():
    session = Session()
    store = ZkManagedLedgerStore(session)  # type: ignore[arg-type]
    paths = cursors(session, 5)
    session.nodes[paths[2]] = (b"{}", 7)  # another broker wrote it
    del session.nodes[paths[4]]  # deleted meanwhile
    results = await asyncio.gather(
        *(store.put_cursor("t", "ns", f"topic-{i}", "sub", {"mark_delete": [2, i]}, 0) for i in range(5)),
        return_exceptions=True)  # fmt: skip
    assert results[:2] == [1, 1] and results[3] == 1
    assert isinstance(results[2], MetadataVersionConflict) and isinstance(results[4], NotFound)
    assert session.nodes[paths[2]] == (b"{}", 7)  # not overwritten
    assert [decode(session.nodes[paths[i]][0]) for i in (0, 1, 3)] == [{"mark_delete": [2, i]} for i in (0, 1, 3)]
    assert session.calls == [("multi", 5)] + [("set", 1)] * 5


async def test_zookeeper_trouble_fails_every_write_of_the_group_without_resending():
    session = Session()
    store = ZkManagedLedgerStore(session)  # type: ignore[arg-type]
    cursors(session, 3)
    session.fail_with = Timeout("no answer")
    results = await asyncio.gather(
        *(store.put_cursor("t", "ns", f"topic-{i}", "sub", {}, 0) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, Timeout) for r in results)
    assert session.calls == [("multi", 3)]


async def test_writes_made_while_groups_are_in_flight_go_out_together(monkeypatch):
    from magnetar.metadata import grouped_sets

    monkeypatch.setattr(grouped_sets, "MAX_IN_FLIGHT", 1)
    session = Session()
    store = ZkManagedLedgerStore(session)  # type: ignore[arg-type]
    cursors(session, 30)
    first = asyncio.ensure_future(store.put_cursor("t", "ns", "topic-0", "sub", {}, 0))
    await asyncio.sleep(0)  # the first group is in flight
    rest = [asyncio.ensure_future(store.put_cursor("t", "ns", f"topic-{i}", "sub", {}, 0)) for i in range(1, 30)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert await asyncio.gather(first, *rest) == [1] * 30
    assert session.calls == [("set", 1), ("multi", 29)]


async def test_a_group_is_bounded_in_bytes(monkeypatch):
    from magnetar.metadata import grouped_sets

    monkeypatch.setattr(grouped_sets, "MAX_GROUP_BYTES", 3000)
    session = Session()
    store = ZkManagedLedgerStore(session)  # type: ignore[arg-type]
    cursors(session, 10)
    doc = {"properties": {"p": "x" * 500}}
    assert await asyncio.gather(*(store.put_cursor("t", "ns", f"topic-{i}", "sub", doc, 0) for i in range(10))) == [1] * 10
    sizes = [n for _, n in session.calls]
    assert sum(sizes) == 10 and max(sizes) == 3  # about 830 bytes each (256 of them overhead)
