"""The auditor against real ZooKeeper, bookie and auditor processes (issue 7)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest

from magnetar.common.errors import LedgerFenced, NoSuchLedger
from magnetar.common.netutil import free_port
from magnetar.ledger.bookie_client import BookieClient, Entry
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.session import ZkSession
from magnetar.metadata.underreplication import ZkUnderReplicationStore
from magnetar.proto.v1 import auditor_pb2 as apb
from magnetar.proto.v1 import auditor_pb2_grpc as apb_grpc
from magnetar.testing.shell import magnetar
from magnetar.tools.shell import numbered_payload

pytestmark = pytest.mark.integration

# A 2 s session: a killed bookie's registration is gone 2 s later (ZooKeeper ticks 500 ms).
BOOKIE = {"zk_session_timeout_s": 2.0, "flush_interval_s": 0.2}
AUDITOR = {
    "grace_period_s": 2.0,
    "poll_interval_s": 0.5,
    "retry_interval_s": 1.0,
    "zk_session_timeout_s": 4.0,
}


@pytest.fixture
async def ledgers(zk_connect, zk_root):
    session = ZkSession(zk_connect, zk_root)
    await session.start()
    client = LedgerClient(session, LedgerClientConfig(add_timeout_s=5, read_timeout_s=5))
    yield client
    await client.close()
    await session.close()


async def write_ledgers(
    client: LedgerClient, count: int, entries: int, size: int = 100
) -> dict[int, int]:
    """``count`` closed ledgers (E=3, Qw=2, Qa=2) of numbered entries; {ledger id: entries}."""
    written = {}
    for _ in range(count):
        handle = await client.create_ledger(3, 2, 2)
        ids = await asyncio.gather(
            *(handle.add_entry(numbered_payload(e, size)) for e in range(entries))
        )
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


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        name: float(value)
        for name, value in (line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    }


async def marked(client: LedgerClient) -> dict[int, list[str]]:
    """The markers as ``listunderreplicated`` prints them, read in this process: a look
    through the shell starts a Python process (a second of a loaded CPU), too slow to
    poll with. The shell's own output is checked where a test asserts on it."""
    markers = await ZkUnderReplicationStore(client.session).list()
    return {m.ledger_id: list(m.missing) for m in markers}


async def registered(client: LedgerClient) -> set[str]:
    """The registered bookies (writable and read-only), as ``listbookies`` lists them."""
    return set(await client.registry.list_writable()) | set(await client.registry.list_read_only())


async def check_fully_replicated(
    client: LedgerClient, written: dict[int, int], live: set[str], size: int = 100
) -> dict[int, LedgerMetadata]:
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
            assert holders == set(md.write_set(e)), (
                f"ledger {ledger_id} entry {e} on {sorted(holders)}, write set {md.write_set(e)}"
            )
            assert len(holders) == md.write_quorum
        if not entries:
            continue
        reader = await client.open_ledger(ledger_id, recovery=False)
        got = await reader.read(0, entries - 1)
        assert [e.payload for e in got] == [numbered_payload(e, size) for e in range(entries)]
    return found


async def auditor_status(address: str) -> apb.AuditorStatus:
    async with grpc.aio.insecure_channel(address) as channel:
        return await apb_grpc.AuditorStub(channel).GetStatus(apb.GetStatusRequest(), timeout=10)


@pytest.mark.slow
async def test_lost_bookie_is_replaced_in_every_fragment(
    bookie_factory, auditor_factory, ledgers, zk_connect, zk_root
):
    bookies = bookie_factory.start_many(4, **BOOKIE)
    written = await write_ledgers(ledgers, 6, 300)
    empty = await ledgers.create_ledger(3, 2, 2)
    await empty.close()
    written[empty.ledger_id] = 0
    while True:  # two free_port() calls may hand out the same port: keep them apart
        metrics_port = free_port()
        auditor = auditor_factory.create(**AUDITOR, metrics_port=metrics_port)
        if auditor.port != metrics_port:
            break
    auditor.start()
    # the bookie that holds the most ledgers goes for good
    counts = {b.address: 0 for b in bookies}
    for ledger_id in written:
        for b in (await ledgers.ledger_metadata(ledger_id)).bookies():
            counts[b] += 1
    victim = next(b for b in bookies if b.address == max(counts, key=counts.__getitem__))
    affected = {
        lid for lid in written if victim.address in (await ledgers.ledger_metadata(lid)).bookies()
    }
    victim.kill()
    deadline = time.monotonic() + 30
    while victim.address in await registered(ledgers):
        assert time.monotonic() < deadline, "the victim's registration did not expire"
        await asyncio.sleep(0.1)
    gone_at = time.monotonic()
    seen: dict[int, list[str]] = {}
    status = None

    async def restored() -> bool:
        nonlocal status
        now = await marked(ledgers)
        seen.update(now)
        status = await auditor_status(auditor.address)
        return not now and status.ledgers_replicated == len(affected)

    deadline = gone_at + AUDITOR["grace_period_s"] + 60
    while not await restored():
        assert time.monotonic() < deadline, (
            f"not restored within grace + 60 s; still marked: {await marked(ledgers)}"
        )
        await asyncio.sleep(0.2)
    took = time.monotonic() - gone_at
    assert all(
        missing == [victim.address] for missing in seen.values()
    )  # the markers name the lost bookie
    live = {b.address for b in bookies if b is not victim}
    metadata = await check_fully_replicated(ledgers, written, live)
    assert all(victim.address not in md.bookies() for md in metadata.values())
    assert status is not None and status.is_leader and status.leader_id == auditor.address
    # with E=3 and Qw=2 a bookie holds 2 of every 3 entries of each fragment it is in
    assert status.entries_copied == sum(200 for lid in affected if written[lid])
    assert status.under_replicated_count == 0 and not status.in_progress
    metrics = scrape(metrics_port)
    assert metrics["magnetar_auditor_entries_copied_total"] == status.entries_copied
    assert metrics["magnetar_auditor_ledgers_replicated_total"] == len(affected)
    assert metrics["magnetar_auditor_is_leader"] == 1
    assert metrics["magnetar_auditor_under_replicated_ledgers"] == 0
    print(f"restored {len(affected)} ledgers {took:.1f} s after the registration went")


async def fragments_backed_by_data(
    client: LedgerClient, ledger_id: int, entries: int, skip: set[str]
) -> LedgerMetadata:
    """The ledger's metadata, checked: each fragment has E distinct bookies, and each
    bookie it names (other than ``skip``) holds every entry it should."""
    md = await client.ledger_metadata(ledger_id)
    for i, f in enumerate(md.fragments):
        assert len(set(f.bookies)) == md.ensemble_size, f"ledger {ledger_id}: {f}"
        last = md.fragment_last_entry(i)
        for b in set(f.bookies) - skip:
            want = {e for e in range(f.first_entry, last + 1) if b in md.write_set(e)}
            missing = want - await stored_ids(b, ledger_id)
            assert not missing, (
                f"ledger {ledger_id}: metadata names {b} but it lacks entries {sorted(missing)[:5]}…"
            )
    return md


@pytest.mark.slow
async def test_killing_the_leading_auditor_mid_replication(
    bookie_factory, auditor_factory, ledgers, zk_connect, zk_root
):
    bookies = bookie_factory.start_many(4, **BOOKIE)
    written = await write_ledgers(ledgers, 6, 1500)
    # Throttled so that the leader is still copying when it is killed: a fragment (1,000
    # entries) takes a second, and the leader has another ledger to copy after its first.
    slow = {**AUDITOR, "throttle_entries_per_s": 1000, "replication_workers": 1, "batch_entries": 50}
    first = auditor_factory(**slow)
    second = auditor_factory(**slow)
    assert (await auditor_status(second.address)).leader_id == first.address
    # the bookie in most ledgers (at least 5 of 6): both replicas get ledgers to copy
    holders = [(await ledgers.ledger_metadata(lid)).bookies() for lid in written]
    victim = max(bookies, key=lambda b: sum(b.address in h for h in holders))
    victim.kill()
    stop = asyncio.Event()
    checks = 0

    async def watch_metadata() -> None:  # consistency at every moment, not only at the end
        nonlocal checks
        while not stop.is_set():
            for ledger_id, entries in written.items():
                await fragments_backed_by_data(ledgers, ledger_id, entries, {victim.address})
            checks += 1
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch_metadata())
    try:
        deadline = time.monotonic() + 60
        while not any(
            p.entries_copied > 0 for p in (await auditor_status(first.address)).in_progress
        ):
            assert time.monotonic() < deadline, "the leader never started copying"
            await asyncio.sleep(0.1)
        status = await auditor_status(first.address)
        assert status.is_leader and status.in_progress
        first.kill()  # the leader, in the middle of copying a fragment
        killed_at = time.monotonic()
        while (await auditor_status(second.address)).leader_id != second.address:
            await asyncio.sleep(0.2)
        took_over = time.monotonic() - killed_at
        assert took_over <= slow["zk_session_timeout_s"] + 3
        deadline = time.monotonic() + 120
        while await marked(ledgers) or (await auditor_status(second.address)).in_progress:
            assert time.monotonic() < deadline, f"not finished: {await marked(ledgers)}"
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await watcher  # re-raises a consistency failure seen on the way
    assert checks > 5
    live = {b.address for b in bookies if b is not victim}
    await check_fully_replicated(ledgers, written, live)
    assert (await auditor_status(second.address)).ledgers_replicated >= 1
    print(f"new leader after {took_over:.1f} s; {checks} consistency checks passed")


@pytest.mark.slow
async def test_periodic_check_finds_a_bookie_that_came_back_empty(
    bookie_factory, auditor_factory, ledgers, zk_connect, zk_root
):
    bookies = bookie_factory.start_many(4, **BOOKIE)
    written = await write_ledgers(ledgers, 4, 300)
    # a long grace period: the death watch must not be what notices
    auditor = auditor_factory(**{**AUDITOR, "grace_period_s": 600.0, "audit_interval_s": 1.0})
    holders = [(await ledgers.ledger_metadata(lid)).bookies() for lid in written]
    wiped = max(bookies, key=lambda b: sum(b.address in h for h in holders))
    held = {
        lid for lid in written if wiped.address in (await ledgers.ledger_metadata(lid)).bookies()
    }
    assert held
    wiped.kill()
    shutil.rmtree(wiped.data_dir)
    # ZooKeeper remembers its cookie: the operator says the data is gone on purpose, once
    # the killed bookie's registration has expired.
    deadline = time.monotonic() + 30
    while (retired := magnetar("shell", "--zookeeper", zk_connect, "--zk-root", zk_root, "cookie-delete",
                               "--bookie", wiped.address)).returncode != 0:  # fmt: skip
        assert "is registered" in retired.stderr and time.monotonic() < deadline, retired
        await asyncio.sleep(0.5)
    wiped.start()
    assert [await stored_ids(wiped.address, lid) for lid in held] == [set()] * len(
        held
    )  # back, and empty
    deadline = time.monotonic() + 60
    while True:
        status = await auditor_status(auditor.address)
        if status.ledgers_replicated >= len(held) and not await marked(ledgers):
            break
        assert time.monotonic() < deadline, f"not re-replicated: {status}"
        await asyncio.sleep(0.2)
    assert (
        status.last_audit.ledgers_checked >= len(written)
        and status.last_audit.auditor_id == auditor.address
    )
    assert not status.lost_bookies  # the death watch saw nothing to do
    live = {b.address for b in bookies}
    metadata = await check_fully_replicated(ledgers, written, live)
    # a spare bookie took the wiped one's place in every fragment it was in
    assert all(wiped.address not in metadata[lid].bookies() for lid in held)


@pytest.mark.slow
async def test_open_ledgers_dead_writer_recovered_live_writer_left_alone(
    bookie_factory, auditor_factory, ledgers, zk_connect, zk_root
):
    bookies = bookie_factory.start_many(4, **BOOKIE)
    live_handle = await ledgers.create_ledger(3, 2, 2)
    for e in range(100):
        await live_handle.add_entry(numbered_payload(e, 100))
    writer = subprocess.Popen(
        [sys.executable, "-m", "magnetar.testing.ledger_writer", "--zookeeper", zk_connect, "--zk-root", zk_root,
         "--size", "100", "--in-flight", "20", "--session-timeout", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert writer.stdout is not None
    dead_ledger = int(writer.stdout.readline().split()[1])
    confirmed = [int(writer.stdout.readline().split()[1]) for _ in range(300)]
    writer.kill()
    writer.wait(10)
    writer.stdout.close()
    both = set(live_handle.metadata.current_ensemble) & set(
        (await ledgers.ledger_metadata(dead_ledger)).current_ensemble
    )
    victim = next(b for b in bookies if b.address in both)
    auditor = auditor_factory(**{**AUDITOR, "open_ledger_grace_s": 3.0})
    victim.kill()
    # the dead writer's ledger is fenced, closed and replicated; the live one stays marked
    deadline = time.monotonic() + 60
    while set(await marked(ledgers)) != {live_handle.ledger_id}:
        assert time.monotonic() < deadline, f"markers: {await marked(ledgers)}"
        await asyncio.sleep(0.2)
    recovered = await ledgers.ledger_metadata(dead_ledger)
    assert recovered.is_closed and recovered.last_entry_id >= confirmed[-1]
    live = {b.address for b in bookies if b is not victim}
    await check_fully_replicated(ledgers, {dead_ledger: recovered.last_entry_id + 1}, live)
    await asyncio.sleep(3)  # well past the open-ledger grace: still left to its writer
    still = await ledgers.ledger_metadata(live_handle.ledger_id)
    assert not still.is_closed and victim.address in still.current_ensemble
    assert set(under_replicated(zk_connect, zk_root)) == {live_handle.ledger_id}
    # the writer's next adds change its ensemble; the auditor then does the older fragment
    for e in range(100, 200):
        assert await live_handle.add_entry(numbered_payload(e, 100)) == e
    deadline = time.monotonic() + 60
    while await marked(ledgers):
        assert time.monotonic() < deadline, f"markers: {await marked(ledgers)}"
        await asyncio.sleep(0.2)
    await live_handle.close()
    await check_fully_replicated(ledgers, {live_handle.ledger_id: 200}, live)
    assert (await auditor_status(auditor.address)).ledgers_replicated == 2


async def test_an_idle_live_writers_ledger_is_fenced_after_its_grace_and_replicated(
    bookie_factory, auditor_factory, ledgers, zk_connect, zk_root
):
    # Found by the chaos run: a writer that stops writing never changes its ensemble, so
    # without this Qw stays short until a second bookie loss takes both copies.
    bookies = bookie_factory.start_many(4, **BOOKIE)
    idle = await ledgers.create_ledger(3, 2, 2)
    for e in range(100):
        await idle.add_entry(numbered_payload(e, 100))
    victim = next(b for b in bookies if b.address in idle.metadata.current_ensemble)
    auditor_factory(**{**AUDITOR, "open_ledger_grace_s": 1.0, "live_writer_grace_s": 2.0})
    victim.kill()
    deadline = time.monotonic() + 60
    while await marked(ledgers) or not (await ledgers.ledger_metadata(idle.ledger_id)).is_closed:
        assert time.monotonic() < deadline, f"markers: {await marked(ledgers)}"
        await asyncio.sleep(0.2)
    closed = await ledgers.ledger_metadata(idle.ledger_id)
    assert closed.last_entry_id == 99  # every acknowledged entry kept
    live = {b.address for b in bookies if b is not victim}
    await check_fully_replicated(ledgers, {idle.ledger_id: 100}, live)
    with pytest.raises(LedgerFenced):  # the writer learns on its next add, and goes on elsewhere
        await idle.add_entry(numbered_payload(100, 100))


async def test_shell_triggeraudit_and_clear_errors(
    bookie_factory, auditor_factory, ledgers, zk_connect, zk_root
):
    # The commands that need no cluster run while it starts (each starts a Python process).
    loop = asyncio.get_running_loop()
    nobody_run = loop.run_in_executor(None, shell, zk_connect, zk_root, "triggeraudit")
    down_run = loop.run_in_executor(None, shell, zk_connect, zk_root, "triggeraudit", "--auditor", "127.0.0.1:1")
    bad_run = loop.run_in_executor(None, lambda: magnetar("auditor", "--zookeeper", zk_connect, "--grace-period", "-1"))
    bookie_factory.start_many(3, **BOOKIE)
    nobody = await nobody_run  # before any auditor runs
    assert (
        nobody.returncode == 1
        and "no auditor is running" in nobody.stderr
        and len(nobody.stderr.splitlines()) == 1
    )
    written = await write_ledgers(ledgers, 2, 30)
    replicas = auditor_factory.start_many(2, **AUDITOR)
    deadline = time.monotonic() + 30
    while not (leading := [r for r in replicas if (await auditor_status(r.address)).is_leader]):
        assert time.monotonic() < deadline, "no auditor took the lead"
        await asyncio.sleep(0.05)
    [leader] = leading
    follower = next(r for r in replicas if r is not leader)
    result = shell(zk_connect, zk_root, "triggeraudit")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        f"audit by {leader.address}: {len(written)} closed ledgers, 2 fragments checked, 0 marked"
    )
    forwarded = shell(
        zk_connect, zk_root, "triggeraudit", "--auditor", follower.address
    )  # the follower asks the leader
    assert forwarded.returncode == 0 and forwarded.stdout.startswith(
        f"audit by {leader.address}:"
    ), forwarded.stderr
    status = await auditor_status(follower.address)
    assert (
        not status.is_leader
        and status.leader_id == leader.address
        and status.last_audit.ledgers_checked == 2
    )
    assert shell(zk_connect, zk_root, "listunderreplicated").stdout == ""
    down = await down_run
    assert down.returncode == 1 and "cannot reach" in down.stderr and "Traceback" not in down.stderr
    bad = await bad_run
    assert bad.returncode == 2 and bad.stderr.startswith(
        "magnetar auditor: invalid configuration: grace_period_s"
    )
    assert len(bad.stderr.splitlines()) == 1


async def test_full_entry_check_finds_what_first_and_last_miss(bookie_factory, ledgers):
    from magnetar.auditor.checker import check_all, missing_copies
    from magnetar.ledger.metadata import Fragment

    bookies = tuple(b.address for b in bookie_factory.start_many(3, **BOOKIE))
    md = LedgerMetadata(3, 2, 2, fragments=(Fragment(0, bookies),)).closed(29, 30 * 100)
    ledger_id, _ = await ledgers.store.create(md)
    hole = bookies[1]
    for e in range(30):
        for b in md.write_set(e):
            if (b, e) != (hole, 10):  # one entry in the middle of what `hole` holds is gone
                async with BookieClient(b) as c:
                    assert await c.add_entries([Entry(ledger_id, e, e - 1, numbered_payload(e, 100))]) == []
    live = set(bookies)
    assert await missing_copies(ledgers, ledger_id, md, False, live) == set()
    assert await missing_copies(ledgers, ledger_id, md, True, live) == {hole}
    markers = ZkUnderReplicationStore(ledgers.session)
    report = await check_all(ledgers, markers, live, full=False)
    assert (report.ledgers_checked, report.ledgers_marked) == (1, 0) and await markers.list() == []
    report = await check_all(ledgers, markers, live, full=True)
    assert (report.ledgers_checked, report.ledgers_marked) == (1, 1)
    assert [(m.ledger_id, m.missing) for m in await markers.list()] == [(ledger_id, (hole,))]
