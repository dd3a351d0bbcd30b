"""Length-prefixed frames, the framed session's wire (broker/session/, client/framed.py):
a 4-byte big-endian length, then that many bytes (one protobuf message).

:class:`FrameDecoder` cuts frames out of what a socket gave without copying them: the
frames of one read are views of that read's bytes; only a frame cut by the read's end
is kept (copied once) until the rest of it comes.
"""

from __future__ import annotations

import contextlib
import socket
import struct

from magnetar.common.errors import InvalidArgument
from magnetar.common.grpcutil import MAX_MESSAGE_BYTES

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = MAX_MESSAGE_BYTES
"""The largest frame either side accepts: the gRPC doors' message limit."""


KEEPALIVE = ((socket.TCP_KEEPIDLE, 10), (socket.TCP_KEEPINTVL, 5), (socket.TCP_KEEPCNT, 3)) if hasattr(socket, "TCP_KEEPIDLE") else ()
"""TCP keepalive of framed connections: a peer that vanished without closing (its host
cut off) is found in about 25 s, as gRPC's keepalive pings find it on a gRPC stream."""


def keep_alive(sock: socket.socket | None) -> None:
    """Turn TCP keepalive on for ``sock`` (both ends of a framed session)."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in KEEPALIVE:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def encode(body: bytes) -> bytes:
    """``body`` as one frame."""
    return HEADER.pack(len(body)) + body


class FrameDecoder:
    """Frames out of a byte stream, fed as it arrives.

    Args:
        max_bytes: a frame announcing more is refused (the peer is not speaking this
            protocol, or would exhaust memory).
    """

    __slots__ = ("_buffer", "max_bytes")

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self.max_bytes = max_bytes

    @property
    def pending(self) -> int:
        """Bytes held of a frame not complete yet."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[memoryview]:
        """The bodies of the frames ``data`` completes, in order (views: parse them
        before feeding again is not needed, they stay valid).

        Raises:
            InvalidArgument: a frame longer than ``max_bytes``; nothing more can be read
                from the stream.
        """
        if self._buffer:
            self._buffer += data
            view = memoryview(self._buffer)
        else:
            view = memoryview(data)
        frames: list[memoryview] = []
        end = len(view)
        pos = 0
        unpack = HEADER.unpack_from
        while end - pos >= 4:
            (size,) = unpack(view, pos)
            if size > self.max_bytes:
                view.release()
                self._buffer = bytearray()
                raise InvalidArgument(f"a frame of {size} bytes is longer than the limit of {self.max_bytes}")
            if end - pos - 4 < size:
                break
            frames.append(view[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if not frames:
            view.release()  # the buffer grows again on the next read
            if not self._buffer and pos < end:
                self._buffer = bytearray(data)
            return frames
        # The frames keep the old buffer (or the read's bytes) alive; it is never changed again.
        self._buffer = bytearray(view[pos:]) if pos < end else bytearray()
        return frames
