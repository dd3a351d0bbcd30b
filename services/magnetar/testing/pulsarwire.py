"""A bare Pulsar protocol connection for tests: frames in, frames out, nothing else (to
send what a real client never would)."""

from __future__ import annotations

import asyncio
from ssl import SSLContext
from types import TracebackType
from typing import Self

from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol.frames import Frame, FrameDecoder, encode_command


def connect_command(
    protocol_version: int = 20, token: str | None = None, client_version: str = "Pulsar-CPP-v4.2.0",
) -> pb.BaseCommand:
    """CONNECT as pulsar-client 4.2.0 sends it (or as ``client_version``)."""
    connect = pb.CommandConnect(client_version=client_version, protocol_version=protocol_version)
    if token is not None:
        connect.auth_method_name = "token"
        connect.auth_data = token.encode()
    return pb.BaseCommand(type=pb.BaseCommand.CONNECT, connect=connect)


def lookup_command(topic: str, request_id: int) -> pb.BaseCommand:
    return pb.BaseCommand(type=pb.BaseCommand.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=topic, request_id=request_id))


class RawPulsarConnection:
    """One socket to a Pulsar protocol listener."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = FrameDecoder()
        self.frames: list[Frame] = []

    @classmethod
    async def open(cls, host: str, port: int, ssl: SSLContext | None = None) -> Self:
        """Connect (with TLS when given ``ssl``, a client context)."""
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl)
        return cls(reader, writer)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.writer.close()

    async def send(self, *commands: pb.BaseCommand) -> None:
        await self.send_bytes(b"".join(encode_command(c) for c in commands))

    async def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def receive(self, timeout_s: float = 10.0) -> Frame:
        """The next frame. Raises: EOFError when the broker closed the connection first."""
        async with asyncio.timeout(timeout_s):
            while not self.frames:
                data = await self.reader.read(65536)
                if not data:
                    raise EOFError("the broker closed the connection")
                self.frames.extend(self.decoder.feed(data))
        return self.frames.pop(0)

    async def handshake(
        self, protocol_version: int = 20, token: str | None = None, client_version: str = "Pulsar-CPP-v4.2.0",
    ) -> pb.CommandConnected:
        await self.send(connect_command(protocol_version, token, client_version))
        frame = await self.receive()
        if frame.command.type != pb.BaseCommand.CONNECTED:
            raise AssertionError(f"CONNECT answered with {frame.type_name}: {frame.command}")
        return frame.command.connected

    async def closed_by_peer(self, timeout_s: float = 10.0) -> bool:
        """True once the broker closes the connection (frames before that are kept);
        False if it is still open after ``timeout_s``."""
        try:
            async with asyncio.timeout(timeout_s):
                while data := await self.reader.read(65536):
                    self.frames.extend(self.decoder.feed(data))
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True
