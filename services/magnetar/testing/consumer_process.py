"""A consumer in a process of its own, for tests that SIGKILL consumers.

``python -m magnetar.testing.consumer_process URL TOPIC SUBSCRIPTION TYPE NAME`` subscribes,
prints ``ready``, then one JSON line per message received (``{"v": payload, "k": key,
"r": redelivery count, "t": time printed}``) *before* acknowledging it, so a message printed by a killed
consumer may come again elsewhere, but a message never printed was never acknowledged.
:class:`ConsumerProcess` runs it and collects the lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from typing import Any


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    for name in ("url", "topic", "subscription", "type", "name"):
        parser.add_argument(name)
    parser.add_argument("--queue", type=int, default=100)
    parser.add_argument("--ack-delay-ms", type=float, default=0.0)
    parser.add_argument("--priority", type=int, default=0)
    args = parser.parse_args(argv)

    import magnetar.asyncio as mg

    async def run() -> None:
        async with mg.Client(args.url) as client:
            consumer = await client.subscribe(
                args.topic, args.subscription, consumer_type=mg.ConsumerType[args.type], consumer_name=args.name,
                initial_position=mg.InitialPosition.Earliest, receiver_queue_size=args.queue, priority_level=args.priority,
            )
            print("ready", flush=True)
            while True:
                msg = await consumer.receive()
                line = {"v": msg.data().decode(), "k": msg.partition_key(), "r": msg.redelivery_count(), "t": time.time()}
                sys.stdout.write(json.dumps(line) + "\n")
                sys.stdout.flush()
                if args.ack_delay_ms:
                    await asyncio.sleep(args.ack_delay_ms / 1000)
                await consumer.acknowledge(msg)

    asyncio.run(run())


class ConsumerProcess:
    """Runs :func:`main` in a child process; :attr:`messages` fills as it prints."""

    def __init__(self, url: str, topic: str, subscription: str, sub_type: str, name: str, *extra: str) -> None:
        self.name = name
        self.messages: list[dict[str, Any]] = []
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "magnetar.testing.consumer_process", url, topic, subscription, sub_type, name, *extra],
            stdout=subprocess.PIPE, text=True,
        )
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        with self._proc.stdout:
            for line in self._proc.stdout:
                if line.strip() == "ready":
                    self._ready.set()
                elif line.startswith("{"):
                    self.messages.append(json.loads(line))

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"consumer {self.name} did not subscribe within {timeout_s}s")

    def values(self) -> list[int]:
        return [int(m["v"]) for m in self.messages]

    def kill(self) -> None:
        """SIGKILL, and wait for the output to end."""
        self._proc.kill()
        self._proc.wait()
        self._reader.join(10)

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(10)


def wait_until(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
