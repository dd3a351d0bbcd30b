"""Message ids as Pulsar's WebSocket API writes them: standard base64 of a protobuf
``MessageIdData`` with PulsarApi.proto's field numbers, so a Pulsar client's ids and the
SDK's ids are the same ids.

Fields (proto2; only varints are written)::

    1 ledgerId  uint64  (always)           3 partition    int32 (only when >= 0)
    2 entryId   uint64  (always)           4 batch_index  int32 (only when != -1)
    7 first_chunk_message_id  MessageIdData  (a chunked message's id only: its first
      chunk; fields 1-4 are then its last chunk's, as Pulsar writes a ChunkMessageIdImpl)

Decoding skips the fields it does not use (``ack_set``, ``batch_size``) and refuses torn
or malformed input with InvalidArgument. The protobuf is coded here by hand (a few varints) so that these bytes
do not depend on the broker's own ``MessageIdData``, which has other field numbers.
"""

from __future__ import annotations

import base64
import binascii

from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import ChunkMessageId, MessageId

_U64 = (1 << 64) - 1
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_LEDGER, _ENTRY, _PARTITION, _BATCH_INDEX = 1, 2, 3, 4
_FIRST_CHUNK = 7
_MAX_ENCODED = 1024
"""Longer text is no message id (a newer client's id with an ack set stays far below)."""


def _put_varint(out: bytearray, value: int) -> None:
    value &= _U64  # negatives as protobuf writes them: ten bytes, two's complement
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def to_bytes(mid: MessageId) -> bytes:
    """The ``MessageIdData`` bytes of ``mid``."""
    out = bytearray(b"\x08")
    _put_varint(out, mid.ledger_id())
    out.append(0x10)
    _put_varint(out, mid.entry_id())
    if mid.partition() >= 0:
        out.append(0x18)
        _put_varint(out, mid.partition())
    if mid.batch_index() != -1:
        out.append(0x20)
        _put_varint(out, mid.batch_index())
    if isinstance(mid, ChunkMessageId):
        first = to_bytes(mid.first_chunk_message_id())
        out.append(_FIRST_CHUNK << 3 | _BYTES)
        _put_varint(out, len(first))
        out += first
    return bytes(out)


def encode(mid: MessageId) -> str:
    """``mid`` as the base64 text the WebSocket API sends (``CAAQAw==`` = 0:3)."""
    return base64.b64encode(to_bytes(mid)).decode("ascii")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value & _U64, pos


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF  # protobuf keeps the low 32 bits of an int32's varint
    return value - (1 << 32) if value >= 1 << 31 else value


def from_bytes(data: bytes) -> MessageId:
    """Parse ``MessageIdData`` bytes.

    Raises:
        InvalidArgument: torn or malformed bytes, ledgerId or entryId missing, or a
            value out of a message id's range.
    """
    fields = {_PARTITION: -1, _BATCH_INDEX: -1}
    first: bytes | None = None
    pos = 0
    try:
        while pos < len(data):
            key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ValueError("field number 0")
            if wire == _VARINT:
                value, pos = _varint(data, pos)
                if number in (_LEDGER, _ENTRY):
                    fields[number] = _int64(value)
                elif number in (_PARTITION, _BATCH_INDEX):
                    fields[number] = _int32(value)
                continue
            if number in (_LEDGER, _ENTRY, _PARTITION, _BATCH_INDEX):
                raise ValueError(f"field {number} has wire type {wire}, not a varint")
            if wire == _FIXED64:
                pos += 8
            elif wire == _FIXED32:
                pos += 4
            elif wire == _BYTES:
                length, pos = _varint(data, pos)
                if number == _FIRST_CHUNK:
                    first = data[pos : pos + length]
                pos += length
            else:
                raise ValueError(f"unsupported wire type {wire}")
            if pos > len(data):
                raise ValueError("truncated field")
    except ValueError as exc:
        raise InvalidArgument(f"malformed MessageIdData: {exc}") from None
    for number, name in ((_LEDGER, "ledgerId"), (_ENTRY, "entryId")):
        if number not in fields:
            raise InvalidArgument(f"malformed MessageIdData: {name} is missing")
    mid = MessageId(ledger_id=fields[_LEDGER], entry_id=fields[_ENTRY], partition=fields[_PARTITION], batch_index=fields[_BATCH_INDEX])
    if first is not None and len(first) == 0:
        raise InvalidArgument("malformed MessageIdData: an empty first_chunk_message_id")
    return mid if first is None else ChunkMessageId(from_bytes(first), mid)


def decode(text: object) -> MessageId:
    """Parse the base64 text of a message id.

    Raises:
        InvalidArgument: not a string, not base64, or not a ``MessageIdData``.
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"a message id is a base64 string, not {type(text).__name__}")
    if len(text) > _MAX_ENCODED:
        raise InvalidArgument(f"invalid message id: {len(text)} characters is too long")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidArgument(f"invalid message id {text!r}: not base64 ({exc})") from None
    try:
        return from_bytes(data)
    except InvalidArgument as exc:
        raise InvalidArgument(f"invalid message id {text!r}: {exc.message}") from None
