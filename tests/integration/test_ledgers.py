"""Replicated ledgers against real bookie processes and ZooKeeper."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from magnetar.common.errors import InvalidArgument, LedgerFenced, NoSuchLedger, NotEnoughBookies
from magnetar.ledger.bookie_client import BookieClient
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.ledger.metadata import LedgerState
from magnetar.metadata.session import ZkSession
from magnetar.testing.shell import magnetar
from magnetar.tools.shell import numbered_payload

pytestmark = pytest.mark.integration


@pytest.fixture
async def ledgers(zk_connect, zk_root):
    session = ZkSession(zk_connect, zk_root)
    await session.start()
    client = LedgerClient(session, LedgerClientConfig(add_timeout_s=5, read_timeout_s=5))
    yield client
    await client.close()
    await session.close()


async def stored_ids(address: str, ledger_id: int) -> set[int]:
    async with BookieClient(address) as c:
        try:
            return {e.entry_id async for e in c.read_entries(ledger_id)}
        except NoSuchLedger:
            return set()


async def test_seed_example_striping_on_four_bookies(bookie_factory, ledgers):
    bookie_factory.start_many(4)
    handle = await ledgers.create_ledger(4, 3, 2)
    ids = await asyncio.gather(*(handle.add_entry(b"%d" % e) for e in range(1000)))
    assert list(ids) == list(range(1000))
    await handle.close()
    b1, b2, b3, b4 = handle.metadata.fragments[0].bookies
    held = {b: await stored_ids(b, handle.ledger_id) for b in (b1, b2, b3, b4)}
    assert {b for b in held if 0 in held[b]} == {b1, b2, b3}
    assert {b for b in held if 1 in held[b]} == {b2, b3, b4}
    assert {b for b in held if 2 in held[b]} == {b3, b4, b1}
    ensemble = [b1, b2, b3, b4]
    for e in range(1000):
        holders = {b for b in held if e in held[b]}
        assert holders == {ensemble[(e + k) % 4] for k in range(3)}, f"entry {e} on {holders}"
    assert all(len(held[b]) == 750 for b in held)  # 3 of every 4 entries, nothing outside
    reader = await ledgers.open_ledger(handle.ledger_id)
    assert [e.payload for e in await reader.read(0, 999)] == [b"%d" % e for e in range(1000)]


async def test_sigkill_during_writes_changes_the_ensemble_and_loses_nothing(bookie_factory, ledgers, zk_connect, zk_root):
    bookies = bookie_factory.start_many(4)
    handle = await ledgers.create_ledger(3, 2, 2)
    confirmed: list[int] = []

    async def write() -> None:
        for e in range(3000):
            fut = handle.add_entry(numbered_payload(e, 100))
            fut.add_done_callback(lambda f: confirmed.append(f.result()) if not f.exception() else None)
            if e % 50 == 49:
                await fut  # keep a window of ~50 adds in flight
        await handle.close()

    writer = asyncio.create_task(write())
    while len(confirmed) < 500:
        await asyncio.sleep(0.01)
    victim_address = handle.metadata.fragments[0].bookies[1]
    victim = next(b for b in bookies if b.address == victim_address)
    await asyncio.to_thread(victim.kill)
    await asyncio.wait_for(writer, 60)
    assert confirmed == list(range(3000))

    shown = magnetar("shell", "--zookeeper", zk_connect, "--zk-root", zk_root, "ledgermetadata", "--ledger", str(handle.ledger_id))
    doc = json.loads(shown.stdout)
    assert doc["state"] == "CLOSED" and doc["last_entry_id"] == 2999
    assert len(doc["fragments"]) >= 2, doc
    assert victim_address in doc["fragments"][0]["bookies"]
    assert victim_address not in doc["fragments"][-1]["bookies"]
    assert 500 <= doc["fragments"][1]["first_entry"] <= 3000
    reader = await ledgers.open_ledger(handle.ledger_id)
    got = await reader.read(0, 2999)
    assert [e.payload for e in got] == [numbered_payload(e, 100) for e in range(3000)]
    # The new fragment's entries really are on the replacement bookie.
    new_fragment = doc["fragments"][-1]
    replacement = (set(new_fragment["bookies"]) - set(doc["fragments"][0]["bookies"])).pop()
    assert await stored_ids(replacement, handle.ledger_id)


async def test_recovery_fences_the_first_writer(bookie_factory, ledgers, zk_connect, zk_root):
    bookie_factory.start_many(3)
    writer = await ledgers.create_ledger(3, 2, 2)
    await asyncio.gather(*(writer.add_entry(b"x%d" % e) for e in range(100)))
    session = ZkSession(zk_connect, zk_root)
    await session.start()
    other = LedgerClient(session)
    try:
        reader = await other.open_ledger(writer.ledger_id)  # recovery
        assert reader.metadata.state is LedgerState.CLOSED
        assert reader.metadata.last_entry_id == 99
        assert reader.metadata.length == sum(len(b"x%d" % e) for e in range(100))
        with pytest.raises(LedgerFenced):
            await writer.add_entry(b"too late")
        with pytest.raises(LedgerFenced):
            await writer.close()
        assert [e.payload for e in await reader.read(98, 99)] == [b"x98", b"x99"]
        again = await other.open_ledger(writer.ledger_id)  # a closed ledger is left as is
        assert again.metadata == reader.metadata
    finally:
        await other.close()
        await session.close()


def start_writer(zk_connect: str, zk_root: str) -> tuple[subprocess.Popen[str], list[str], threading.Thread]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "magnetar.testing.ledger_writer", "--zookeeper", zk_connect, "--zk-root", zk_root,
         "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2", "--size", "50", "--in-flight", "200"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return proc, lines, t


def kill_writer_and_recover(zk_connect: str, zk_root: str, delay: float) -> None:
    """Kill a ledger writer ``delay`` s after its first confirmed add; recovery must close
    its ledger at or after the last confirmed entry, with every entry up to there readable."""
    shell = ("shell", "--zookeeper", zk_connect, "--zk-root", zk_root)
    proc, lines, reader = start_writer(zk_connect, zk_root)
    deadline = time.monotonic() + 30
    while not any(line.startswith("confirmed") for line in lines) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(delay)
    proc.kill()
    proc.wait(10)
    reader.join(10)
    proc.stdout.close()  # type: ignore[union-attr]
    ledger = int(lines[0].split()[1])
    confirmed = [int(line.split()[1]) for line in lines[1:]]
    assert confirmed and confirmed == list(range(len(confirmed)))
    result = magnetar(*shell, "recover", "--ledger", str(ledger))
    assert result.returncode == 0, result.stderr
    last = int(result.stdout.strip())
    assert last >= confirmed[-1], f"recovered at {last}, but {confirmed[-1]} was confirmed"
    meta = json.loads(magnetar(*shell, "ledgermetadata", "--ledger", str(ledger)).stdout)
    assert (meta["state"], meta["last_entry_id"]) == ("CLOSED", last)
    assert meta["length"] == 50 * (last + 1)
    check = asyncio.run(read_all(zk_connect, zk_root, ledger, last))
    assert check == [numbered_payload(e, 50) for e in range(last + 1)]


@pytest.mark.slow
def test_writer_killed_mid_flight_recovers_at_or_after_its_last_confirmed_entry(bookie_factory, zk_connect, zk_root):
    bookie_factory.start_many(3)
    delays = (0.2, 0.5, 1.0, 1.5, 2.5)
    # The writers are independent (a process and a ledger each): all five run at once.
    with ThreadPoolExecutor(len(delays)) as pool:
        for case in [pool.submit(kill_writer_and_recover, zk_connect, zk_root, delay) for delay in delays]:
            case.result()


async def read_all(zk_connect: str, zk_root: str, ledger: int, last: int) -> list[bytes]:
    session = ZkSession(zk_connect, zk_root)
    await session.start()
    client = LedgerClient(session)
    try:
        reader = await client.open_ledger(ledger)
        assert reader.last_entry_id == last
        return [e.payload for e in await reader.read(0, last)]
    finally:
        await client.close()
        await session.close()


async def test_open_ledger_readers_see_entries_up_to_the_lac(bookie_factory, ledgers):
    bookie_factory.start_many(3)
    handle = await ledgers.create_ledger(3, 3, 2)
    for e in range(10):
        await handle.append(b"e%d" % e)  # one at a time: entry e carries LAC e-1
    reader = await ledgers.open_ledger(handle.ledger_id, recovery=False)
    assert reader.last_entry_id == 8
    assert [e.payload for e in await reader.read(0, 8)] == [b"e%d" % e for e in range(9)]
    with pytest.raises(InvalidArgument, match="past the last readable entry 8"):
        await reader.read(0, 9)
    await handle.append(b"e10")
    assert await reader.refresh_lac() == 9
    await handle.close()
    assert (await ledgers.ledger_metadata(handle.ledger_id)).last_entry_id == 10


async def test_reads_move_to_the_next_replica(bookie_factory, ledgers):
    bookies = bookie_factory.start_many(3)
    handle = await ledgers.create_ledger(3, 2, 2)
    await asyncio.gather(*(handle.add_entry(b"r%d" % e) for e in range(200)))
    await handle.close()
    await asyncio.to_thread(bookies[0].kill)
    reader = await ledgers.open_ledger(handle.ledger_id)
    assert [e.payload for e in await reader.read(0, 199)] == [b"r%d" % e for e in range(200)]


async def test_errors_are_clear(bookie_factory, ledgers, zk_connect, zk_root):
    bookie_factory.start_many(2)
    with pytest.raises(NotEnoughBookies, match="needed 3, found 2"):
        await ledgers.create_ledger(3, 2, 2)
    with pytest.raises(InvalidArgument, match="E=2 Qw=3 Qa=1"):
        await ledgers.create_ledger(2, 3, 1)
    with pytest.raises(NoSuchLedger, match="no such ledger: 424242"):
        await ledgers.open_ledger(424242)
    with pytest.raises(NoSuchLedger):
        await ledgers.open_ledger(424242, recovery=False)
    with pytest.raises(InvalidArgument):
        await ledgers.open_ledger(-1)
    assert await ledgers.list_ledgers() == []  # nothing was created by the failures
    shell = ("shell", "--zookeeper", zk_connect, "--zk-root", zk_root)
    for args in (("ledgermetadata", "--ledger", "424242"), ("recover", "--ledger", "424242")):
        result = magnetar(*shell, *args)
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr.count("\n") == 1 and "no such ledger: 424242" in result.stderr
    bad = magnetar(*shell, "simpletest", "--ensemble", "1", "--write-quorum", "2", "--ack-quorum", "1")
    assert bad.returncode == 1 and "write quorum" in bad.stderr and "Traceback" not in bad.stderr
    few = magnetar(*shell, "simpletest", "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2")
    assert few.returncode == 1 and "needed 3, found 2" in few.stderr


async def test_shell_simpletest_listledgers_and_delete(bookie_factory, ledgers, zk_connect, zk_root):
    bookie_factory.start_many(3)
    shell = ("shell", "--zookeeper", zk_connect, "--zk-root", zk_root)
    result = magnetar(*shell, "simpletest", "--ensemble", "3", "--write-quorum", "3", "--ack-quorum", "2", "--entries", "50")
    assert result.returncode == 0, result.stderr
    first, ok = result.stdout.splitlines()
    assert first.startswith("ledger ") and ok == "OK"
    ledger = int(first.split()[1])
    assert magnetar(*shell, "listledgers").stdout.split() == [str(ledger)]
    meta = json.loads(magnetar(*shell, "ledgermetadata", "--ledger", str(ledger)).stdout)
    assert {k: meta[k] for k in ("ensemble_size", "write_quorum", "ack_quorum", "state", "last_entry_id")} == {
        "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2, "state": "CLOSED", "last_entry_id": 49}
    bookies = meta["fragments"][0]["bookies"]
    assert [await stored_ids(b, ledger) for b in bookies] == [set(range(50))] * 3
    await ledgers.delete_ledger(ledger)
    assert magnetar(*shell, "listledgers").stdout == ""
    assert [await stored_ids(b, ledger) for b in bookies] == [set()] * 3
    second = await ledgers.create_ledger(3, 3, 2)
    assert second.ledger_id > ledger  # ids are never reused
    await second.close()
