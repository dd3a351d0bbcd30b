"""A pulsar-client producer in a process of its own, for tests that SIGKILL it mid-message.

``python -m magnetar.testing.pulsar_producer_process URL TOPIC SIZE [SIZE ...] --big BYTES``
opens a producer with ``chunking_enabled`` (batching off, as pulsar-client requires), sends
one message of each SIZE in turn and prints ``{"acked": i, "id": "<message id>"}`` once the
broker has acknowledged message ``i``; then prints ``big`` and waits for a line on stdin
before sending one message of BYTES (the test kills it while that one is in flight). Every
payload is :func:`payload` of its index, so a test knows each message whole.
"""

from __future__ import annotations

import argparse
import json
import sys


def payload(index: int, size: int) -> bytes:
    """Message ``index``'s payload of ``size`` bytes (its index repeated: a part of it is
    told from the whole by its length, and from another message by its bytes)."""
    unit = f"<{index}>".encode()
    return (unit * (size // len(unit) + 1))[:size]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("topic")
    parser.add_argument("sizes", type=int, nargs="+")
    parser.add_argument("--big", type=int, required=True)
    args = parser.parse_args(argv)

    from magnetar.testing.pulsarclient import pulsar_client

    client = pulsar_client(args.url, operation_timeout_seconds=15, connection_timeout_ms=5000)
    producer = client.create_producer(
        args.topic, chunking_enabled=True, batching_enabled=False, send_timeout_millis=30_000,
    )  # fmt: skip
    for i, size in enumerate(args.sizes):
        mid = producer.send(payload(i, size))
        print(json.dumps({"acked": i, "id": str(mid)}), flush=True)
    print("big", flush=True)
    sys.stdin.readline()
    producer.send(payload(len(args.sizes), args.big))
    print(json.dumps({"acked": len(args.sizes)}), flush=True)  # reached only if not killed first
    client.close()


if __name__ == "__main__":
    main()
