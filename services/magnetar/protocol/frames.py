"""Frames of Pulsar's binary protocol (big-endian sizes):

- a simple command: ``[totalSize][commandSize][BaseCommand]``;
- a payload command (SEND, MESSAGE): the same, then optionally ``[0x0e02][size]
  [BrokerEntryMetadata]``, then ``[0x0e01][CRC32C][metadataSize][MessageMetadata]
  [payload]`` (the checksum covers metadataSize, metadata and payload; a peer below
  protocol version 6 sends ``[metadataSize][MessageMetadata][payload]`` without it).

``totalSize`` counts everything after itself. :class:`FrameDecoder` takes the bytes of a
connection as they come and hands out whole frames; every way a frame can be wrong is a
:class:`ProtocolError` (a bad checksum is not: the frame is whole, and it carries a
:class:`ChecksumMismatch` for the door to answer).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from google.protobuf.message import DecodeError, Message

from magnetar.common.errors import ChecksumMismatch, ProtocolError
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol.checksum import crc32c

MAGIC_CRC32C = 0x0E01
"""Starts the checksummed part of a payload command."""
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
"""Starts the broker entry metadata a broker may put ahead of a MESSAGE's metadata."""
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's default ``maxMessageSize``, announced in CONNECTED."""
FRAME_PADDING = 10 * 1024
"""Room for the command and metadata around a message of the largest size (Pulsar's
``MESSAGE_SIZE_FRAME_PADDING``): the largest frame is max message size + this."""
DEFAULT_MAX_FRAME_SIZE = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING

PAYLOAD_TYPES = frozenset({pb.BaseCommand.SEND, pb.BaseCommand.MESSAGE})
"""The commands followed by metadata and a payload."""

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_SIZES = struct.Struct(">II")  # totalSize, commandSize
_CHECKSUM_HEADER = struct.Struct(">HI")  # magic, CRC32C
_BODIES = {
    field.number: field.name
    for field in pb.BaseCommand.DESCRIPTOR.fields
    if field.message_type is not None and any(f.is_required for f in field.message_type.fields)
}
"""Command type -> its body's field, for the commands whose body has required fields
(PING and PONG have empty bodies: one left out is no loss)."""
_MIN_COMMAND_SIZE = 2
"""The smallest BaseCommand: its ``type`` tag and one byte of value."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame. For a payload command: ``metadata`` (None when the checksum
    does not match: its bytes are not to be trusted), the raw ``metadata_bytes`` and
    ``payload`` (kept as they came, so an entry is stored byte for byte), whether a
    checksum came with them, ``checksum_error`` when it did not match, and ``checksum``
    when it did (the CRC32C the decoder verified: the entry stored is not checksummed
    again)."""

    command: pb.BaseCommand
    metadata: pb.MessageMetadata | None = None
    metadata_bytes: bytes = b""
    payload: bytes = b""
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None
    has_checksum: bool = False
    checksum_error: ChecksumMismatch | None = None
    checksum: int | None = None

    @property
    def type_name(self) -> str:
        return command_name(self.command.type)


def command_name(command_type: int) -> str:
    """``BaseCommand.Type``'s name for ``command_type`` (its number when it has none)."""
    try:
        return pb.BaseCommand.Type.Name(command_type)
    except ValueError:
        return str(command_type)


# -- encoding ---------------------------------------------------------------------------------
def encode_command(command: pb.BaseCommand) -> bytes:
    """A simple command's frame."""
    body = command.SerializeToString()
    return _SIZES.pack(4 + len(body), len(body)) + body


def encode_payload_command(
    command: pb.BaseCommand,
    metadata: pb.MessageMetadata | bytes,
    payload: bytes,
    *,
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
    checksum: bool = True,
) -> bytes:
    """A payload command's frame: ``metadata`` (a message or its serialized bytes) and
    ``payload``, with a CRC32C unless ``checksum`` is false (peers below protocol 6)."""
    body = command.SerializeToString()
    meta = metadata if isinstance(metadata, bytes) else metadata.SerializeToString()
    checked = _U32.pack(len(meta)) + meta + payload
    parts = [body]
    if broker_entry_metadata is not None:
        bem = broker_entry_metadata.SerializeToString()
        parts.append(_U16.pack(MAGIC_BROKER_ENTRY_METADATA) + _U32.pack(len(bem)) + bem)
    if checksum:
        parts.append(_CHECKSUM_HEADER.pack(MAGIC_CRC32C, crc32c(checked)))
    parts.append(checked)
    rest = b"".join(parts)
    return _SIZES.pack(4 + len(rest), len(body)) + rest


# -- decoding ---------------------------------------------------------------------------------
def _parse(message: Message, data: bytes, what: str) -> None:
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise ProtocolError(f"{what} does not parse: {exc}") from exc


def decode_command(data: bytes) -> pb.BaseCommand:
    """A BaseCommand from its bytes.

    Raises:
        ProtocolError: not a BaseCommand, a type this protocol does not know, or a
            command without its required fields.
    """
    command = pb.BaseCommand()
    _parse(command, data, "the command")
    if not command.HasField("type"):
        raise ProtocolError("the command has no type, or a type this broker does not know")
    field = _BODIES.get(command.type)
    if field is not None and not command.HasField(field):
        raise ProtocolError(f"command {command_name(command.type)} lacks required fields: {field}")
    if not command.IsInitialized():
        missing = ", ".join(command.FindInitializationErrors())
        raise ProtocolError(f"command {command_name(command.type)} lacks required fields: {missing}")
    return command


def decode_frame(frame: bytes) -> Frame:
    """One frame from the bytes after its ``totalSize``.

    Raises:
        ProtocolError: see :class:`FrameDecoder`.
    """
    size = len(frame)
    if size < 4:
        raise ProtocolError(f"a frame of {size} bytes is too small: it holds no command size")
    (command_size,) = _U32.unpack_from(frame, 0)
    if command_size < _MIN_COMMAND_SIZE or command_size > size - 4:
        raise ProtocolError(f"command size {command_size} does not fit a frame of {size} bytes")
    command = decode_command(frame[4 : 4 + command_size])
    pos = 4 + command_size
    if command.type not in PAYLOAD_TYPES:
        if pos != size:
            raise ProtocolError(
                f"{size - pos} bytes after a {command_name(command.type)} command, which carries no payload"
            )
        return Frame(command)
    return _decode_payload(command, frame, pos)


def _need(frame: bytes, pos: int, count: int, what: str) -> None:
    if len(frame) - pos < count:
        raise ProtocolError(f"the frame ends inside its {what} ({len(frame) - pos} of {count} bytes)")


def _decode_payload(command: pb.BaseCommand, frame: bytes, pos: int) -> Frame:
    name = command_name(command.type)
    if pos == len(frame):
        raise ProtocolError(f"a {name} command without metadata and payload")
    broker_entry_metadata = None
    if len(frame) - pos >= 2 and _U16.unpack_from(frame, pos)[0] == MAGIC_BROKER_ENTRY_METADATA:
        _need(frame, pos, 6, "broker entry metadata size")
        (bem_size,) = _U32.unpack_from(frame, pos + 2)
        _need(frame, pos + 6, bem_size, "broker entry metadata")
        broker_entry_metadata = pb.BrokerEntryMetadata()
        _parse(broker_entry_metadata, frame[pos + 6 : pos + 6 + bem_size], "the broker entry metadata")
        pos += 6 + bem_size
    expected = None
    if len(frame) - pos >= 2 and _U16.unpack_from(frame, pos)[0] == MAGIC_CRC32C:
        _need(frame, pos, 6, "checksum")
        expected = _CHECKSUM_HEADER.unpack_from(frame, pos)[1]
        pos += 6
    _need(frame, pos, 4, "metadata size")
    (metadata_size,) = _U32.unpack_from(frame, pos)
    _need(frame, pos + 4, metadata_size, "metadata")
    metadata_bytes = frame[pos + 4 : pos + 4 + metadata_size]
    payload = frame[pos + 4 + metadata_size :]
    if expected is not None:
        actual = crc32c(memoryview(frame)[pos:])
        if actual != expected:
            return Frame(
                command, None, metadata_bytes, payload, broker_entry_metadata,
                has_checksum=True, checksum_error=ChecksumMismatch(expected, actual),
            )  # fmt: skip
    metadata = pb.MessageMetadata()
    _parse(metadata, metadata_bytes, f"the {name} command's message metadata")
    if not metadata.IsInitialized():
        missing = ", ".join(metadata.FindInitializationErrors())
        raise ProtocolError(f"the {name} command's message metadata lacks required fields: {missing}")
    return Frame(
        command, metadata, metadata_bytes, payload, broker_entry_metadata,
        has_checksum=expected is not None, checksum=expected,
    )  # fmt: skip


class FrameDecoder:
    """Whole frames out of a connection's bytes, as they come.

    A size over ``max_frame_size`` is refused as soon as its 4 bytes arrive, so no more
    than one frame of at most that size plus what one :meth:`feed` brings is ever held.
    After an error the decoder refuses everything (the stream cannot be followed).
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out as a frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """The frames ``data`` completes (none while a frame is still partial).

        Raises:
            ProtocolError: a frame size over the limit or too small, a command that does
                not parse, bytes left over in a frame (and every later call).
        """
        if self._error is not None:
            raise self._error
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        pos = 0
        try:
            while len(buffer) - pos >= 4:
                (total,) = _U32.unpack_from(buffer, pos)
                if total > self.max_frame_size:
                    raise ProtocolError(f"a frame of {total} bytes is over the limit of {self.max_frame_size} bytes")
                if total < 4 + _MIN_COMMAND_SIZE:
                    raise ProtocolError(f"a frame of {total} bytes is too small to hold a command")
                if len(buffer) - pos - 4 < total:
                    break
                frames.append(decode_frame(bytes(buffer[pos + 4 : pos + 4 + total])))
                pos += 4 + total
        except ProtocolError as exc:
            self._error = exc
            buffer.clear()
            raise
        del buffer[:pos]
        return frames
