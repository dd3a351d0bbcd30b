"""The auditor against real ZooKeeper, bookie and auditor processes (issue 7)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time

import grpc
import pytest

from magnetar.common.errors import NoSuchLedger
from magnetar.ledger.bookie_client import BookieClient
from magnetar.ledger.client import LedgerClient, LedgerClientConfig
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.session import ZkSession
from magnetar.proto.v1 import auditor_pb2 as apb
from magnetar.proto.v1 import auditor_pb2_grpc as apb_grpc
from magnetar.shell import numbered_payload
from magnetar.testing.shell import magnetar

pytestmark = pytest.mark.integration

BOOKIE = {"zk_session_timeout_s": 4.0, "flush_interval_s": 0.2}
AUDITOR = {"grace_period_s": 2.0, "poll_interval_s": 0.5, "retry_interval_s": 1.0, "zk_session_timeout_s": 4.0}


@pytest.fixture
async def ledgers(zk_connect, zk_root):
    session = ZkSession(zk_connect, zk_root)
    await session.start()
    client = LedgerClient(session, LedgerClientConfig(add_timeout_s=5, read_timeout_s=5))
    yield client
    await client.close()
    await session.close()


async def write_ledgers(client: LedgerClient, count: int, entries: int, size: int = 100) -> dict[int, int]:
    """``count`` closed ledgers (E=3, Qw=2, Qa=2) of numbered entries; {ledger id: entries}."""
    written = {}
    for _ in range(count):
        handle = await client.create_ledger(3, 2, 2)
        ids = await asyncio.gather(*(handle.add_entry(numbered_payload(e, size)) for e in range(entries)))
        assert list(ids) == list(range(entries))
        await handle.close()
        written[handle.ledger_id] = entries
    return written


async def stored_ids(address: str, ledger_id: int) -> set[int]:
    async with BookieClient(address) as c:
        try:
            return {e.entry_id async for e in c.read_entries(ledger_id)}
        except NoSuchLedger:
            return set()


def shell(zk_connect: str, zk_root: str, *args: str):
    return magnetar("shell", "--zookeeper", zk_connect, "--zk-root", zk_root, *args)


def under_replicated(zk_connect: str, zk_root: str) -> dict[int, list[str]]:
    result = shell(zk_connect, zk_root, "listunderreplicated")
    assert result.returncode == 0, result.stderr
    out = {}
    for line in result.stdout.splitlines():
        ledger, missing = line.split("\t")
        out[int(ledger)] = missing.split(",")
    return out


def wait_until(predicate, timeout: float, what: str, step: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"not within {timeout:g} s: {what}")


def registered(zk_connect: str, zk_root: str) -> set[str]:
    return set(shell(zk_connect, zk_root, "listbookies").stdout.split()) | set(
        shell(zk_connect, zk_root, "listbookies", "--readonly").stdout.split()
    )


async def check_fully_replicated(client: LedgerClient, written: dict[int, int], live: set[str]) -> dict[int, LedgerMetadata]:
    """Every fragment names only live bookies, and each bookie read directly holds
    exactly the entries of which it is in the write set: Qw copies, nothing outside."""
    found = {}
    for ledger_id, entries in written.items():
        md = await client.ledger_metadata(ledger_id)
        found[ledger_id] = md
        for f in md.fragments:
            assert set(f.bookies) <= live, f"ledger {ledger_id} fragment {f} names a dead bookie"
            assert len(set(f.bookies)) == md.ensemble_size
        held = {b: await stored_ids(b, ledger_id) for b in live}
        for e in range(entries):
            holders = {b for b in held if e in held[b]}
            assert holders == set(md.write_set(e)), f"ledger {ledger_id} entry {e} on {sorted(holders)}, write set {md.write_set(e)}"
            assert len(holders) == md.write_quorum
        if not entries:
            continue
        reader = await client.open_ledger(ledger_id, recovery=False)
        got = await reader.read(0, entries - 1)
        assert [e.payload for e in got] == [numbered_payload(e, 100) for e in range(entries)]
    return found


async def auditor_status(address: str) -> apb.AuditorStatus:
    async with grpc.aio.insecure_channel(address) as channel:
        return await apb_grpc.AuditorStub(channel).GetStatus(apb.GetStatusRequest(), timeout=10)


@pytest.mark.slow
async def test_lost_bookie_is_replaced_in_every_fragment(bookie_factory, auditor_factory, ledgers, zk_connect, zk_root):
    bookies = [bookie_factory(**BOOKIE) for _ in range(4)]
    written = await write_ledgers(ledgers, 6, 300)
    empty = await ledgers.create_ledger(3, 2, 2)
    await empty.close()
    written[empty.ledger_id] = 0
    auditor = auditor_factory(**AUDITOR)
    # the bookie that holds the most ledgers goes for good
    counts = {b.address: 0 for b in bookies}
    for ledger_id in written:
        for b in (await ledgers.ledger_metadata(ledger_id)).bookies():
            counts[b] += 1
    victim = next(b for b in bookies if b.address == max(counts, key=counts.__getitem__))
    affected = {lid for lid in written if victim.address in (await ledgers.ledger_metadata(lid)).bookies()}
    victim.kill()
    wait_until(lambda: victim.address not in registered(zk_connect, zk_root), 30, "the victim's registration to expire")
    gone_at = time.monotonic()
    seen: dict[int, list[str]] = {}
    status = None

    async def restored() -> bool:
        nonlocal status
        now = under_replicated(zk_connect, zk_root)
        seen.update(now)
        status = await auditor_status(auditor.address)
        return not now and status.ledgers_replicated == len(affected)

    deadline = gone_at + AUDITOR["grace_period_s"] + 60
    while not await restored():
        assert time.monotonic() < deadline, f"not restored within grace + 60 s; still marked: {under_replicated(zk_connect, zk_root)}"
        await asyncio.sleep(0.3)
    took = time.monotonic() - gone_at
    assert all(missing == [victim.address] for missing in seen.values())  # the markers name the lost bookie
    live = {b.address for b in bookies if b is not victim}
    metadata = await check_fully_replicated(ledgers, written, live)
    assert all(victim.address not in md.bookies() for md in metadata.values())
    assert status is not None and status.is_leader and status.leader_id == auditor.address
    # with E=3 and Qw=2 a bookie holds 2 of every 3 entries of each fragment it is in
    assert status.entries_copied == sum(200 for lid in affected if written[lid])
    assert status.under_replicated_count == 0 and not status.in_progress
    print(f"restored {len(affected)} ledgers {took:.1f} s after the registration went")
