"""``magnetar produce`` and ``magnetar consume``: Pulsar's ``pulsar-client``, over the SDK.

``produce`` sends each ``-m`` message ``-n`` times; ``consume`` prints each message as
``----- got message -----`` then ``key:[…], properties:[…], content:…``, acknowledges
it, and stops after ``-n`` (0: never). Both end with a count line on stdout. Errors
are one line on stderr and exit 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import sys

from magnetar.client.sync import (
    Client,
    ConsumerType,
    InitialPosition,
    Message,
    MessageId,
    Result,
)
from magnetar.common.errors import MagnetarError, Timeout
from magnetar.tools import toolauth

DEFAULT_URL = "127.0.0.1:6660"
_TYPES = {"Exclusive": ConsumerType.Exclusive, "Shared": ConsumerType.Shared,
          "Failover": ConsumerType.Failover, "Key_Shared": ConsumerType.KeyShared}
_POSITIONS = {"Earliest": InitialPosition.Earliest, "Latest": InitialPosition.Latest}


class UsageError(Exception):
    """Bad command-line input found after argparse (exit 2)."""


def parse_properties(text: str | None) -> dict[str, str]:
    """``k=v,k2=v2`` → {"k": "v", "k2": "v2"}."""
    props: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--properties wants key=value pairs separated by commas, got {item!r}")
        props[key.strip()] = value
    return props


def format_message(msg: Message) -> str:
    """pulsar-client's two lines for one received message."""
    key = msg.partition_key() or "null"
    props = ", ".join(f"{k}={v}" for k, v in sorted(msg.properties().items()))
    content = msg.data().decode("utf-8", errors="replace")
    return f"----- got message -----\nkey:[{key}], properties:[{props}], content:{content}"


def produce(args: argparse.Namespace) -> int:
    props = parse_properties(args.properties)
    if args.num_produce < 1:
        raise UsageError("-n must be at least 1")
    messages = [m.encode() for m in args.messages]
    results: list[object] = []

    def done(res: object, _msg_id: MessageId | None) -> None:
        results.append(res)

    client = _client(args)
    try:
        producer = client.create_producer(args.topic, batching_enabled=not args.disable_batching, block_if_queue_full=True)
        for _ in range(args.num_produce):
            for payload in messages:
                producer.send_async(payload, done, properties=props or None, partition_key=args.key)
        producer.flush()
        producer.close()
    finally:
        client.close()
    sent = sum(1 for res in results if res == Result.Ok)
    failed = [res for res in results if res != Result.Ok]
    if failed:
        reason = failed[0].message if isinstance(failed[0], MagnetarError) else str(failed[0])
        raise MagnetarError(f"{len(failed)} of {len(results)} messages failed: {reason}")
    print(f"{sent} messages successfully produced")
    return 0


def consume(args: argparse.Namespace) -> int:
    if args.num_messages < 0:
        raise UsageError("-n must not be negative (0 means forever)")
    timeout_ms = None if args.timeout is None else int(args.timeout * 1000)
    client = _client(args)
    received = 0
    try:
        consumer = client.subscribe(
            args.topic, args.subscription, consumer_type=_TYPES[args.subscription_type],
            initial_position=_POSITIONS[args.position],
        )
        while args.num_messages == 0 or received < args.num_messages:
            try:
                msg = consumer.receive(timeout_millis=timeout_ms)
            except Timeout as exc:
                raise Timeout(f"no message within {args.timeout:g} s after {received} received") from exc
            print(format_message(msg), flush=True)
            consumer.acknowledge(msg)
            received += 1
        consumer.close()
    finally:
        client.close()
    print(f"{received} messages successfully consumed")
    return 0


def _client(args: argparse.Namespace) -> Client:
    return Client(
        args.url, authentication=toolauth.sdk_authentication(args),
        tls_trust_certs_file_path=args.tls_trust_certs_file,
    )


def build_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"magnetar {command}")
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"broker host:port or service URL (default {DEFAULT_URL})")
    toolauth.add_arguments(parser)
    parser.add_argument("--tls-trust-certs-file", dest="tls_trust_certs_file", default=None,
                        help="PEM file of the CAs that sign the brokers' certificates (with a magnetar+ssl:// URL)")
    if command == "produce":
        parser.description = "Send messages to a topic (like pulsar-client produce)."
        parser.add_argument("-m", "--messages", action="append", required=True, help="message text (repeatable)")
        parser.add_argument("-n", "--num-produce", type=int, default=1, help="send each message N times")
        parser.add_argument("-k", "--key", default=None, help="partition key of every message")
        parser.add_argument("--properties", default=None, help="k=v,k2=v2 on every message")
        parser.add_argument("--disable-batching", action="store_true")
        parser.set_defaults(run=produce)
    else:
        parser.description = "Receive, print and acknowledge messages (like pulsar-client consume)."
        parser.add_argument("-s", "--subscription-name", dest="subscription", required=True)
        parser.add_argument("-t", "--subscription-type", choices=list(_TYPES), default="Exclusive")
        parser.add_argument("-n", "--num-messages", type=int, default=1, help="stop after N (0: forever)")
        parser.add_argument("-p", "--subscription-position", dest="position", choices=list(_POSITIONS),
                            default="Latest")
        parser.add_argument("--timeout", type=float, default=None,
                            help="fail if no message arrives within SECONDS (default: wait forever)")
        parser.set_defaults(run=consume)
    return parser


def main(argv: list[str] | None = None, command: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if command is None:  # run as "magnetar-clienttool produce|consume …"
        command = argv.pop(0) if argv and argv[0] in ("produce", "consume") else "produce"
    args = build_parser(command).parse_args(argv)
    try:
        return int(args.run(args))
    except UsageError as exc:
        print(f"magnetar {command}: {exc}", file=sys.stderr)
        return 2
    except MagnetarError as exc:
        print(f"magnetar {command}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def produce_main(argv: list[str] | None = None) -> int:
    return main(argv, "produce")


def consume_main(argv: list[str] | None = None) -> int:
    return main(argv, "consume")
