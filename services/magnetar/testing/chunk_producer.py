"""A producer of chunked messages in a process of its own, for tests that SIGKILL a
producer in the middle of a chunked message.

``python -m magnetar.testing.chunk_producer URL TOPIC MAX_MESSAGE_SIZE SIZE COUNT KILL_AT``
sends COUNT random messages of SIZE bytes with ``chunking_enabled`` (chunks of
MAX_MESSAGE_SIZE), printing one JSON line per message once its send completed
(``{"sha": sha256 of the payload, "id": its message id}``): a printed message was
acknowledged by the broker. Then it starts one more and, once the broker has stored its
first KILL_AT chunks and before the next is sent, SIGKILLs itself: the broker holds part
of a message whose producer is gone.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import sys


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("topic")
    for name in ("max_message_size", "size", "count", "kill_at"):
        parser.add_argument(name, type=int)
    args = parser.parse_args(argv)

    import magnetar.asyncio as mg

    async def run() -> None:
        async with mg.Client(args.url) as client:
            producer = await client.create_producer(
                args.topic, chunking_enabled=True, batching_enabled=False, max_message_size=args.max_message_size,
            )  # fmt: skip
            for _ in range(args.count):
                payload = os.urandom(args.size)
                mid = await producer.send(payload)
                sys.stdout.write(json.dumps({"sha": hashlib.sha256(payload).hexdigest(), "id": str(mid)}) + "\n")
                sys.stdout.flush()
            part = producer.partitions[0]
            enqueue = part._enqueue
            stored: list[asyncio.Future[object]] = []
            stop = asyncio.get_running_loop().create_future()

            def enqueue_until_kill(op):  # type: ignore[no-untyped-def]
                if op.send.num_chunks_from_msg > 1 and op.send.chunk_id >= args.kill_at:
                    if not stop.done():
                        stop.set_result(None)
                    return  # never sent: the process dies first
                stored.append(op.futures[0])
                enqueue(op)

            part._enqueue = enqueue_until_kill  # type: ignore[method-assign]
            producer.send_async(os.urandom(args.size), None)
            await stop
            await asyncio.gather(*stored)  # the broker stored the first KILL_AT chunks
            sys.stdout.write("dying\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(run())


if __name__ == "__main__":
    main()
