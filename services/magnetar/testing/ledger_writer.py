"""A ledger writer for crash tests: ``python -m magnetar.testing.ledger_writer``.

Creates a ledger, prints ``ledger L``, then adds entries 0..N-1 (payload: the entry id in
decimal, repeated to --size bytes) with many in flight, printing ``confirmed E`` each time
entry E is confirmed (in order). Killing it mid-flight leaves an open ledger to recover.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from magnetar.ledger.client import LedgerClient
from magnetar.metadata.session import ZkSession
from magnetar.tools.shell import numbered_payload


async def write(args: argparse.Namespace) -> None:
    session = ZkSession(args.zookeeper, args.zk_root, args.session_timeout)
    await session.start()
    client = LedgerClient(session)
    handle = await client.create_ledger(args.ensemble, args.write_quorum, args.ack_quorum)
    print(f"ledger {handle.ledger_id}", flush=True)
    window: list[asyncio.Future[int]] = []
    for e in range(args.entries):
        window.append(handle.add_entry(numbered_payload(e, args.size)))
        if len(window) >= args.in_flight:
            print(f"confirmed {await window.pop(0)}", flush=True)
    for fut in window:
        print(f"confirmed {await fut}", flush=True)
    await handle.close()
    await client.close()
    await session.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--zk-root", dest="zk_root", required=True)
    p.add_argument("--ensemble", type=int, default=3)
    p.add_argument("--write-quorum", dest="write_quorum", type=int, default=2)
    p.add_argument("--ack-quorum", dest="ack_quorum", type=int, default=2)
    p.add_argument("--entries", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--in-flight", dest="in_flight", type=int, default=100)
    p.add_argument(
        "--session-timeout", dest="session_timeout", type=float, default=10.0,
        help="ZooKeeper session timeout in seconds: how long a killed writer stays registered",
    )  # fmt: skip
    asyncio.run(write(p.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
