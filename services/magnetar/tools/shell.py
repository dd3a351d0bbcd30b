"""``magnetar shell``: BookKeeper-shell-style commands for operators and tests.

Bookie commands talk to one bookie (listbookies, bookiesanity, bookie-write,
readledger); ledger commands go through the ledger client (simpletest, listledgers,
ledgermetadata, recover); auditor commands read the under-replication markers
(listunderreplicated) or ask the leading auditor (triggeraudit); bookieformat and
cookie-delete manage a bookie's cookies.

Each command prints plain lines (kept stable: tests and scripts parse them), and exits
0 on success or 1 with one readable line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from magnetar.common.errors import InvalidArgument, MagnetarError, NotFound, PreconditionFailed
from magnetar.common.tls import add_tls_flags, tls_from_flags
from magnetar.ledger.bookie_client import BookieClient, Entry
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.metadata.session import ZkSession
from magnetar.tools import toolauth

# Ledger ids from 2^62 up are never handed out by ZooKeeper: bookiesanity uses them.
SANITY_LEDGER_BASE = 1 << 62
_WRITE_WINDOW = 64


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def numbered_payload(entry_id: int, size: int) -> bytes:
    """The entry id in decimal, repeated (and cut) to ``size`` bytes."""
    digits = str(entry_id).encode()
    return (digits * (size // len(digits) + 1))[:size]


@asynccontextmanager
async def _ledger_client(args: argparse.Namespace) -> AsyncIterator[LedgerClient]:
    session = ZkSession(args.zookeeper, args.zk_root)
    await session.start()
    client = LedgerClient(session, LedgerClientConfig(auth_token=toolauth.token(args)), tls=tls_from_flags(args))
    try:
        yield client
    finally:
        await client.close()
        await session.close()


async def listbookies(args: argparse.Namespace) -> int:
    async with _ledger_client(args) as client:
        registry = client.registry
        bookies = await (registry.list_read_only() if args.readonly else registry.list_writable())
    for b in bookies:
        _out(b)
    return 0


async def simpletest(args: argparse.Namespace) -> int:
    """Create a ledger, write N entries (payload: the entry id), read them back."""
    async with _ledger_client(args) as client:
        handle = await client.create_ledger(args.ensemble, args.write_quorum, args.ack_quorum)
        _out(f"ledger {handle.ledger_id}")
        ids = await asyncio.gather(*(handle.add_entry(str(e).encode()) for e in range(args.entries)))
        if list(ids) != list(range(args.entries)):
            raise MagnetarError(f"entries were confirmed as {ids[:5]}…, expected 0..{args.entries - 1}")
        await handle.close()
        reader = await client.open_ledger(handle.ledger_id, recovery=False)
        got = await reader.read(0, args.entries - 1) if args.entries else []
        bad = [e.entry_id for e in got if e.payload != str(e.entry_id).encode()]
        if len(got) != args.entries or bad:
            raise MagnetarError(f"read back {len(got)} entries, {len(bad)} with a wrong payload")
    _out("OK")
    return 0


async def listledgers(args: argparse.Namespace) -> int:
    async with _ledger_client(args) as client:
        for ledger_id in await client.list_ledgers():
            _out(str(ledger_id))
    return 0


async def ledgermetadata(args: argparse.Namespace) -> int:
    async with _ledger_client(args) as client:
        metadata = await client.ledger_metadata(args.ledger)
    _out(json.dumps(metadata.to_dict(), indent=2))
    return 0


async def recover(args: argparse.Namespace) -> int:
    async with _ledger_client(args) as client:
        reader = await client.open_ledger(args.ledger, recovery=True)
    _out(str(reader.metadata.last_entry_id))
    return 0


async def listunderreplicated(args: argparse.Namespace) -> int:
    """One line per marked ledger: its id, a tab, the missing bookies (comma-separated)."""
    from magnetar.metadata.underreplication import ZkUnderReplicationStore

    async with _ledger_client(args) as client:
        markers = await ZkUnderReplicationStore(client.session).list()
    for m in markers:
        _out(f"{m.ledger_id}\t{','.join(m.missing)}")
    return 0


async def triggeraudit(args: argparse.Namespace) -> int:
    """Run the auditor's periodic check now, on the leader; prints its summary."""
    from magnetar.auditor.rpc.client import forward_trigger
    from magnetar.metadata.election import leader_of

    target = args.auditor
    if not target:
        async with _ledger_client(args) as client:
            target = await leader_of(client.session, client.session.paths.auditor_election())
        if not target:
            raise MagnetarError(
                f"no auditor is running on {args.zookeeper}{args.zk_root}: start one with `magnetar auditor`"
            )
    r = await forward_trigger(target, tls=tls_from_flags(args), token=toolauth.token(args))
    _out(
        f"audit by {r.auditor_id}: {r.ledgers_checked} closed ledgers, {r.fragments_checked} fragments checked, "
        f"{r.ledgers_marked} marked under-replicated, in {r.duration_s:.2f} s"
    )
    return 0


async def bookiesanity(args: argparse.Namespace) -> int:
    ledger_id = SANITY_LEDGER_BASE + random.getrandbits(32)
    async with BookieClient(args.bookie, tls=tls_from_flags(args), token=toolauth.token(args)) as client:
        entries = [Entry(ledger_id, e, e - 1, numbered_payload(e, 64)) for e in range(args.entries)]
        failed = await client.add_entries(entries)
        if failed:
            raise failed[0][2]
        got = [e async for e in client.read_entries(ledger_id, 0, args.entries - 1)]
        if [(e.entry_id, e.payload) for e in got] != [(e.entry_id, e.payload) for e in entries]:
            raise MagnetarError(f"read back {len(got)} entries that differ from the {args.entries} written")
        await client.delete_ledger(ledger_id)
    _out("OK")
    return 0


async def bookie_write(args: argparse.Namespace) -> int:
    """Entries 0..N-1 with up to a window in flight; ``acked E`` after each in-order ack."""
    async with BookieClient(args.bookie, tls=tls_from_flags(args), token=toolauth.token(args)) as client:
        in_flight: deque[tuple[int, asyncio.Future[list[tuple[int, int, MagnetarError]]]]] = deque()
        next_entry = 0
        try:
            while next_entry < args.entries or in_flight:
                while next_entry < args.entries and len(in_flight) < _WRITE_WINDOW:
                    e = next_entry
                    fut = await client.send_add([Entry(args.ledger, e, e - 1, numbered_payload(e, args.size))])
                    in_flight.append((e, fut))
                    next_entry += 1
                e, fut = in_flight.popleft()
                failed = await fut
                if failed:
                    raise failed[0][2]
                _out(f"acked {e}")
        finally:
            for _, fut in in_flight:  # answers we no longer wait for
                if fut.done() and not fut.cancelled():
                    fut.exception()
                fut.cancel()
    return 0


async def readledger(args: argparse.Namespace) -> int:
    async with BookieClient(args.bookie, tls=tls_from_flags(args), token=toolauth.token(args)) as client:
        async for e in client.read_entries(args.ledger, args.from_entry, args.to_entry):
            head = e.payload[:20].decode("utf-8", "backslashreplace")
            _out(f"{e.entry_id}\t{len(e.payload)}\t{head}")
    return 0


async def bookieformat(args: argparse.Namespace) -> int:
    """Create a bookie's directories and cookies once (BookKeeper's ``bookieformat``, minus
    its wiping): directories that carry this bookie's cookies are left as they are."""
    from magnetar.bookie.config import DEFAULT_PORT, BookieConfig
    from magnetar.bookie.cookie import format_dirs

    config = BookieConfig.load(
        args.config, data_dir=args.data_dir, journal_dir=args.journal_dir,
        advertised_address=args.advertised_address, port=args.port,
    )
    if not config.advertised_address and not config.port:
        raise InvalidArgument("bookieformat needs the bookie's id: give --advertised-address or a fixed --port")
    bookie_id = config.address(DEFAULT_PORT)
    cookie, formatted = await asyncio.to_thread(format_dirs, config, bookie_id)
    state = "formatted" if formatted else "already formatted, nothing changed"
    _out(f"bookie {bookie_id}: {state} (data {cookie.data_dir}, journal {cookie.journal_dir})")
    return 0


async def cookie_delete(args: argparse.Namespace) -> int:
    """Retire a bookie's cookie registered in ZooKeeper (BookKeeper's ``cookie_delete``):
    the statement that its data is gone on purpose, so that it may start again with empty
    directories. Refused while the bookie is registered (running)."""
    from magnetar.metadata.bookies import ZkBookieRegistry, check_bookie_id
    from magnetar.metadata.cookies import ZkCookieStore

    bookie_id = check_bookie_id(args.bookie)
    async with _ledger_client(args) as client:
        if await ZkBookieRegistry(client.session).get_info(bookie_id) is not None:
            raise PreconditionFailed(
                f"bookie {bookie_id} is registered (running, or killed less than a ZooKeeper session "
                f"timeout ago): stop it before retiring its cookie"
            )
        store = ZkCookieStore(client.session)
        found = await store.read(bookie_id)
        if found is None:
            raise NotFound(f"bookie {bookie_id} has no cookie registered in ZooKeeper")
        await store.delete(bookie_id, found[1])
    _out(f"bookie {bookie_id}: cookie deleted (instance {found[0].get('instance_id', '?')})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="magnetar shell", description="Bookie and ledger tools.")
    parser.add_argument("--zookeeper", default="127.0.0.1:2181", help="ZooKeeper HOST:PORT")
    parser.add_argument("--zk-root", dest="zk_root", default="/magnetar", help="root znode")
    toolauth.add_arguments(parser)
    add_tls_flags(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("listbookies", help="registered writable bookies, one host:port per line")
    p.add_argument("--readonly", action="store_true", help="list read-only bookies instead")
    p.set_defaults(run=listbookies)

    p = sub.add_parser("simpletest", help="create a ledger, write N entries, read them back")
    p.add_argument("--ensemble", type=int, default=3, help="ensemble size E")
    p.add_argument("--write-quorum", dest="write_quorum", type=int, default=2, help="write quorum Qw")
    p.add_argument("--ack-quorum", dest="ack_quorum", type=int, default=2, help="ack quorum Qa")
    p.add_argument("--entries", type=int, default=100)
    p.set_defaults(run=simpletest)

    p = sub.add_parser("listledgers", help="every ledger id, one per line")
    p.set_defaults(run=listledgers)

    p = sub.add_parser("ledgermetadata", help="a ledger's metadata as JSON")
    p.add_argument("--ledger", type=int, required=True)
    p.set_defaults(run=ledgermetadata)

    p = sub.add_parser("recover", help="fence and close a ledger; prints its last entry id")
    p.add_argument("--ledger", type=int, required=True)
    p.set_defaults(run=recover)

    p = sub.add_parser("listunderreplicated", help="ledgers marked under-replicated: id, tab, missing bookies")
    p.set_defaults(run=listunderreplicated)

    p = sub.add_parser("triggeraudit", help="run the auditor's check of every closed ledger now")
    p.add_argument("--auditor", help="HOST:PORT of an auditor (default: the leader, found in ZooKeeper)")
    p.set_defaults(run=triggeraudit)

    p = sub.add_parser("bookiesanity", help="write, read back and delete a few entries on one bookie")
    p.add_argument("--bookie", required=True, help="HOST:PORT")
    p.add_argument("--entries", type=int, default=10)
    p.set_defaults(run=bookiesanity)

    p = sub.add_parser("bookie-write", help="write numbered entries to one bookie, printing acks")
    p.add_argument("--bookie", required=True, help="HOST:PORT")
    p.add_argument("--ledger", type=int, required=True)
    p.add_argument("--entries", type=int, required=True)
    p.add_argument("--size", type=int, default=100, help="payload bytes per entry")
    p.set_defaults(run=bookie_write)

    p = sub.add_parser("readledger", help="print entries stored on one bookie: id, length, first 20 bytes")
    p.add_argument("--ledger", type=int, required=True)
    p.add_argument("--bookie", required=True, help="HOST:PORT")
    p.add_argument("--from", dest="from_entry", type=int, default=0)
    p.add_argument("--to", dest="to_entry", type=int, default=-1)
    p.set_defaults(run=readledger)

    p = sub.add_parser(
        "bookieformat", help="create a bookie's directories and cookies once (a second run changes nothing)",
        description="Reads the bookie's settings like `magnetar bookie` does (--config, MAGNETAR_BOOKIE_* "
        "environment, flags) and writes its cookies unless they are there already.",
    )
    p.add_argument("--config", help="the bookie's TOML config file")
    p.add_argument("--data-dir", dest="data_dir")
    p.add_argument("--journal-dir", dest="journal_dir")
    p.add_argument("--advertised-address", dest="advertised_address", help="the bookie's id, host:port")
    p.add_argument("--port", type=int)
    p.set_defaults(run=bookieformat)

    p = sub.add_parser(
        "cookie-delete", help="retire a stopped bookie's cookie in ZooKeeper (its data is gone on purpose)",
        description="A bookie whose directories came back empty is refused while ZooKeeper holds its cookie. "
        "Deleting the cookie lets it start empty; the auditor re-replicates the ledgers it held.",
    )
    p.add_argument("--bookie", required=True, help="the bookie id, HOST:PORT")
    p.set_defaults(run=cookie_delete)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("entries", "size", "ledger", "from_entry"):
        if getattr(args, name, 0) is not None and getattr(args, name, 0) < 0:
            print(f"magnetar shell: --{name.replace('_entry', '')} must not be negative", file=sys.stderr)
            return 2
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.run
    try:
        return asyncio.run(run(args))
    except MagnetarError as exc:
        print(f"magnetar shell {args.command}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"magnetar shell {args.command}: {exc}", file=sys.stderr)
        return 1
