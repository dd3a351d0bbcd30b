"""What every service's entry point shares: the common flags, config loading with a
one-line error, logging, and serving until SIGINT/SIGTERM with a graceful stop."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from magnetar.common.config import ServiceConfig
from magnetar.common.errors import MagnetarError
from magnetar.common.eventloop import dump_stacks_on_stalls, loop_factory, stall_threshold_s
from magnetar.common.logging import configure

C = TypeVar("C", bound=ServiceConfig)
log = logging.getLogger(__name__)


class Server(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def service_parser(service: str, description: str, default_port: int) -> argparse.ArgumentParser:
    """A parser with the flags every service takes (``--config/--zookeeper/--port`` …)."""
    parser = argparse.ArgumentParser(prog=f"magnetar {service}", description=description)
    parser.add_argument("--config", help=f"TOML config file (see conf/{service}.toml)")
    parser.add_argument("--zookeeper", help="ZooKeeper connect string HOST:PORT")
    parser.add_argument("--zk-root", dest="zk_root", help="root znode (default /magnetar)")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help=f"gRPC port (default {default_port})")
    parser.add_argument("--metrics-port", dest="metrics_port", type=int, help="Prometheus port (0: off)")
    return parser


async def run_until_signalled(server: Server) -> None:
    """Start, serve until SIGINT/SIGTERM, then stop gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    threshold_s = stall_threshold_s()
    watch = None if threshold_s is None else loop.create_task(dump_stacks_on_stalls(threshold_s), name="stall-watch")
    try:
        await server.start()
        # What exists once the service is up (modules, protobuf descriptors, gRPC and kazoo
        # machinery: hundreds of thousands of objects) lives as long as the process: keep it
        # out of the cyclic garbage collector, whose full passes would otherwise scan it all
        # again and again and stall the event loop (seen as delayed-delivery lateness).
        gc.freeze()
        await stop.wait()
        log.info("signal received; shutting down")
        await server.stop()
    finally:
        if watch is not None:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)


def run_service(
    service: str,
    parser: argparse.ArgumentParser,
    config_cls: type[C],
    make_server: Callable[[C], Server],
    argv: list[str] | None = None,
) -> int:
    """Parse flags, load the config (flags override file and environment), log, serve.

    Returns the exit code: 0 after a signal, 2 for a bad config, 1 when the service
    could not run; errors are one line on stderr.
    """
    args = vars(parser.parse_args(argv))
    config_file = args.pop("config")
    try:
        config = config_cls.load(config_file, **args)
    except MagnetarError as exc:
        print(f"magnetar {service}: {exc.message}", file=sys.stderr)
        return 2
    configure(service, config.log_level)
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(_serve(make_server, config))
    except MagnetarError as exc:
        print(f"magnetar {service}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


async def _serve(make_server: Callable[[Any], Server], config: ServiceConfig) -> None:
    # The server is built inside the event loop: its parts may bind to the running loop.
    await run_until_signalled(make_server(config))
