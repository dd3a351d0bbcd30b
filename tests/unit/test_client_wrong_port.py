"""The SDK given an address that answers in another protocol than gRPC (a Pulsar protocol
port, an HTTP/1 server): NotGrpcServer at once, saying which port it needs."""

from __future__ import annotations

import asyncio
import time

import pytest

import magnetar.asyncio as mg

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", b"\x00\x00\x00\x10\x00\x00\x00\x0c" + b"\x08" * 16],
    ids=["http1", "pulsar-frame"],
)
async def test_a_server_that_does_not_speak_grpc_is_named_as_such(answer: bytes) -> None:
    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(24)  # the HTTP/2 preface
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(reply, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    started = time.monotonic()
    try:
        with pytest.raises(mg.NotGrpcServer, match="does not speak gRPC") as refused:
            async with mg.Client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=10) as client:
                await client.create_producer("persistent://public/default/t")
    finally:
        server.close()
        await server.wait_closed()
    assert "magnetar://host:6660" in str(refused.value) and time.monotonic() - started < 5
