"""The bookie over gRPC, as a real process: fencing, LAC, delete + GC, read-only mode,
bad input, and the shell commands that operators use."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from magnetar.common.errors import (
    BookieReadOnly,
    EntryTooLarge,
    InvalidArgument,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
)
from magnetar.common.netutil import free_port
from magnetar.ledger.bookie_client import BookieClient, Entry
from magnetar.testing.shell import parse_readledger
from magnetar.testing.shell import warm_magnetar as magnetar

pytestmark = pytest.mark.integration


def entries(ledger: int, first: int, n: int, size: int = 100) -> list[Entry]:
    return [Entry(ledger, e, e - 1, bytes([e % 251]) * size) for e in range(first, first + n)]


async def test_fence_rejects_adds_and_survives_sigkill(bookie_factory):
    bookie = bookie_factory(zk_session_timeout_s=1.0, flush_interval_s=3600)
    async with BookieClient(bookie.address) as c:
        assert await c.add_entries(entries(1, 0, 10)) == []
        assert await c.fence(1) == 8  # the highest LAC it has seen
        failed = await c.add_entries(entries(1, 10, 1) + entries(2, 0, 1))
        assert [(lid, eid, type(err)) for lid, eid, err in failed] == [(1, 10, LedgerFenced)]
        assert "fenced" in failed[0][2].message
        # A fencing read fences a ledger this bookie never saw (recovery does this).
        with pytest.raises(NoSuchEntry):
            await c.read_entry(3, 0, fence=True)
        assert isinstance((await c.add_entries(entries(3, 0, 1)))[0][2], LedgerFenced)
    bookie.kill()  # nothing flushed: the fence must already be durable
    bookie.start()
    async with BookieClient(bookie.address) as c:
        assert isinstance((await c.add_entries(entries(1, 10, 1)))[0][2], LedgerFenced)
        assert [e.entry_id async for e in c.read_entries(1)] == list(range(10))
        assert await c.add_entries(entries(2, 1, 1)) == []


async def test_read_lac_and_entries_carry_the_writers_lac(bookie_factory):
    bookie = bookie_factory()
    async with BookieClient(bookie.address) as c:
        await c.add_entries([Entry(5, 0, -1, b"a"), Entry(5, 1, 0, b"b"), Entry(5, 3, 2, b"d"), Entry(5, 2, 1, b"c")])
        assert await c.read_lac(5) == 2
        e = await c.read_entry(5, 3)
        assert (e.last_add_confirmed, e.payload) == (2, b"d")
        got = [(x.entry_id, x.payload) async for x in c.read_entries(5, 1, 2)]
        assert got == [(1, b"b"), (2, b"c")]
        with pytest.raises(NoSuchLedger):
            await c.read_lac(404)


async def test_delete_ledger_and_entry_log_garbage_collection(bookie_factory):
    # A 1 s session (the test ZooKeeper's shortest): the restart after kill -9 waits it out.
    bookie = bookie_factory(
        flush_interval_s=0.1, gc_interval_s=0.2, entry_log_max_bytes=64 * 1024, zk_session_timeout_s=1.0
    )
    logs_dir = Path(bookie.data_dir) / "ledgers"
    async with BookieClient(bookie.address) as c:
        for first in range(0, 2000, 200):
            assert await c.add_entries(entries(10, first, 200, size=1000)) == []
        assert await c.add_entries(entries(11, 0, 50)) == []
        deadline = time.monotonic() + 10  # ledger 10's 2 MB flushed into several 64 KiB entry logs
        while sum(p.stat().st_size for p in logs_dir.glob("*.log")) < 2000 * 1000 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        logs_before = sorted(logs_dir.glob("*.log"))
        assert len(logs_before) >= 10
        await c.delete_ledger(10)
        with pytest.raises(NoSuchLedger):
            await c.read_entry(10, 0)
        with pytest.raises(NoSuchLedger):
            await c.delete_ledger(10)
        deadline = time.monotonic() + 10
        while len(list(logs_dir.glob("*.log"))) >= len(logs_before) - 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        logs_after = sorted(logs_dir.glob("*.log"))
        assert len(logs_after) < len(logs_before) - 5, "the logs of the deleted ledger were collected"
        assert [e.payload async for e in c.read_entries(11)] == [x.payload for x in entries(11, 0, 50)]
        assert await c.list_ledgers() == [11]
    bookie.kill()
    bookie.start()
    async with BookieClient(bookie.address) as c:
        assert await c.list_ledgers() == [11]  # not resurrected by journal replay
        assert len([e async for e in c.read_entries(11)]) == 50


async def test_read_only_mode_refuses_adds_serves_reads_and_registers_as_read_only(bookie_factory, zk_connect, zk_root):
    bookie = bookie_factory(min_free_disk_bytes=0)
    async with BookieClient(bookie.address) as c:
        assert await c.add_entries(entries(1, 0, 5)) == []
    listing = magnetar("shell", "--zookeeper", zk_connect, "--zk-root", zk_root, "listbookies")
    assert listing.stdout.split() == [bookie.address]
    bookie.stop()
    bookie.process.env["MAGNETAR_BOOKIE_MIN_FREE_DISK_BYTES"] = str(1 << 62)  # no disk is that free
    bookie.start()
    async with BookieClient(bookie.address) as c:
        assert (await c.info()).read_only
        failed = await c.add_entries(entries(1, 5, 1))
        assert isinstance(failed[0][2], BookieReadOnly) and "read-only" in failed[0][2].message
        assert [e.entry_id async for e in c.read_entries(1)] == [0, 1, 2, 3, 4]
    shell = ("shell", "--zookeeper", zk_connect, "--zk-root", zk_root)
    assert magnetar(*shell, "listbookies").stdout == ""
    assert magnetar(*shell, "listbookies", "--readonly").stdout.split() == [bookie.address]
    sanity = magnetar(*shell, "bookiesanity", "--bookie", bookie.address)
    assert sanity.returncode == 1 and "read-only" in sanity.stderr and sanity.stderr.count("\n") == 1


async def test_bad_input_gets_clear_errors_and_changes_nothing(bookie_factory):
    bookie = bookie_factory(max_entry_bytes=1000)
    async with BookieClient(bookie.address) as c:
        failed = await c.add_entries([Entry(-1, 0, -1, b"x"), Entry(1, -2, -1, b"x"), Entry(1, 0, -1, b"y" * 1001)])
        assert [type(err) for _, _, err in failed] == [InvalidArgument, InvalidArgument, EntryTooLarge]
        assert "1001 bytes" in failed[2][2].message
        assert await c.list_ledgers() == []
        with pytest.raises(NoSuchLedger, match="no such ledger: 77"):
            await c.read_entry(77, 0)
        await c.add_entries(entries(1, 0, 1))
        with pytest.raises(NoSuchEntry, match="entry 9"):
            await c.read_entry(1, 9)
        with pytest.raises(InvalidArgument, match="negative"):
            await c.read_entry(1, -1)
        with pytest.raises(InvalidArgument):
            await c.fence(-5)
        with pytest.raises(InvalidArgument):
            [e async for e in c.read_entries(1, -3)]
        assert (await c.info()).journal_records == 1
    # Bytes that are not a protobuf message: a gRPC error, and the bookie carries on.
    async with grpc.aio.insecure_channel(bookie.address) as channel:
        raw = channel.unary_unary("/magnetar.v1.Bookie/ReadEntry", request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await raw(b"\xff\xff\xff\xff", timeout=5)
        assert info.value.code() != grpc.StatusCode.OK
    async with BookieClient(bookie.address) as c:
        assert (await c.read_entry(1, 0)).entry_id == 0
    assert bookie.alive


def test_shell_commands(bookie_factory, zk_connect, zk_root):
    first, second = bookie_factory.start_many(2)
    shell = ("shell", "--zookeeper", zk_connect, "--zk-root", zk_root)
    listed = magnetar(*shell, "listbookies")
    assert listed.returncode == 0 and sorted(listed.stdout.split()) == sorted([first.address, second.address])
    sanity = magnetar(*shell, "bookiesanity", "--bookie", first.address, "--entries", "20")
    assert (sanity.returncode, sanity.stdout) == (0, "OK\n")
    write = magnetar(*shell, "bookie-write", "--bookie", second.address, "--ledger", "3", "--entries", "12", "--size", "25")
    assert write.stdout.splitlines() == [f"acked {e}" for e in range(12)]
    read = magnetar(*shell, "readledger", "--ledger", "3", "--bookie", second.address, "--from", "10", "--to", "11")
    assert read.stdout == "10\t25\t10101010101010101010\n11\t25\t11111111111111111111\n"
    assert sorted(parse_readledger(magnetar(*shell, "readledger", "--ledger", "3", "--bookie", second.address).stdout)) == list(range(12))
    missing = magnetar(*shell, "readledger", "--ledger", "999", "--bookie", second.address)
    assert missing.returncode == 1 and missing.stderr.strip() == f"magnetar shell readledger: no such ledger: 999 on {second.address}"
    down = magnetar(*shell, "bookiesanity", "--bookie", "127.0.0.1:1")
    assert down.returncode == 1 and "127.0.0.1:1" in down.stderr and "Traceback" not in down.stderr
    bad = magnetar(*shell, "bookie-write", "--bookie", first.address, "--ledger", "1", "--entries", "-4")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


async def test_prometheus_metrics_endpoint(bookie_factory):
    port = free_port()
    bookie = bookie_factory(metrics_port=port)
    async with BookieClient(bookie.address) as c:
        assert await c.add_entries(entries(1, 0, 3) + entries(2, 0, 4)) == []
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("magnetar_bookie_"))
    assert float(samples["magnetar_bookie_journal_records_total"]) == 7
    assert float(samples["magnetar_bookie_journal_fsyncs_total"]) >= 1
    assert float(samples["magnetar_bookie_ledgers"]) == 2
    assert float(samples["magnetar_bookie_read_only"]) == 0


async def test_orphan_copies_are_collected_against_the_ledger_metadata(bookie_factory, zk_session):
    """A bookie compares the ledgers it holds with the metadata in ZooKeeper: it deletes a
    ledger whose metadata is gone and drops a closed one no fragment names it in, and keeps
    its own, an open ledger's copy, and ids never issued in this metadata."""
    from magnetar.ledger.metadata import Fragment, LedgerMetadata, LedgerState
    from magnetar.metadata.ledgers import ZkLedgerMetadataStore

    bookie = bookie_factory(
        flush_interval_s=0.2, gc_interval_s=0.3, gc_metadata_interval_s=0.3, gc_overreplicated_ledger_wait_s=0.5,
    )
    store = ZkLedgerMetadataStore(zk_session, LedgerMetadata.from_dict)

    def metadata(*bookies: str, state: LedgerState = LedgerState.CLOSED) -> LedgerMetadata:
        return LedgerMetadata(2, 2, 2, (Fragment(0, bookies),), state=state, last_entry_id=9, length=1000)

    others = ("10.0.0.1:3181", "10.0.0.2:3181")
    mine, _ = await store.create(metadata(bookie.address, others[0]))
    elsewhere, _ = await store.create(metadata(*others))  # the copy's metadata swap lost
    writing, _ = await store.create(metadata(*others, state=LedgerState.OPEN))
    deleted, _ = await store.create(metadata(bookie.address, others[0]))
    await store.delete(deleted)  # deleted while the bookie was away
    never_issued = (1 << 62) + 5
    async with BookieClient(bookie.address) as c:
        for lid in (mine, elsewhere, writing, deleted, never_issued):
            assert await c.add_entries(entries(lid, 0, 10)) == []
        deadline = time.monotonic() + 15
        while set(await c.list_ledgers()) != {mine, writing, never_issued} and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert set(await c.list_ledgers()) == {mine, writing, never_issued}, bookie.log_tail()
        for lid in (mine, writing, never_issued):
            assert [e.entry_id async for e in c.read_entries(lid, 0, 9)] == list(range(10))
        failed = await c.add_entries(entries(deleted, 10, 1))
        assert [type(err) for _, _, err in failed] == [NoSuchLedger]  # deleted for good
        assert await c.add_entries(entries(elsewhere, 0, 10)) == []  # may be copied here again
    log = bookie.log_path.read_text()
    assert f"ledger {deleted} has no metadata" in log and f"ledger {elsewhere} is closed and no fragment names" in log
