"""Pulsar's batch compression codecs: LZ4, ZLIB, ZSTD and SNAPPY, byte for byte as
Pulsar's clients frame them, so that what one client compresses any other decompresses.

The codec of a message is ``MessageMetadata.compression`` (``NONE`` 0, ``LZ4`` 1,
``ZLIB`` 2, ``ZSTD`` 3, ``SNAPPY`` 4), and its ``uncompressed_size`` is the size of the
payload before compression. The formats, as pulsar-client (C++ and Java) writes them:

- LZ4: one raw LZ4 block, with no size prefix (the size is ``uncompressed_size``);
- ZLIB: a zlib stream (RFC 1950: header, deflate data, Adler-32), default level;
- ZSTD: one Zstandard frame, level 3;
- SNAPPY: raw Snappy (its own varint length first, not the framing format).

LZ4, Zstandard and Snappy come from ``cramjam`` (one wheel for the three codecs, built
in Rust with no C library to compile on a fresh machine), zlib from the standard library.

Decompression never trusts the sender: the output is written into a buffer of exactly
the declared ``uncompressed_size``, which must itself be within the caller's limit (the
broker's ``maxMessageSize``), and a payload that does not decompress to exactly that many
bytes is refused. A "zip bomb" or a lying ``uncompressed_size`` is an
:class:`~magnetar.common.errors.InvalidArgument`, never a large allocation.
"""

from __future__ import annotations

import zlib
from enum import IntEnum
from typing import Any

import cramjam

from magnetar.common.errors import InvalidArgument

ZSTD_LEVEL = 3
"""The level Pulsar's clients compress Zstandard with."""

MAX_UNCOMPRESSED_SIZE = 128 * 1024 * 1024
"""The most a stored payload may declare uncompressed when it is read back (a broker
refuses, at publish, one over its own ``maxMessageSize``; this bounds what a reader
allocates for an entry that is not its own, whatever the broker's limit was)."""


class CompressionType(IntEnum):
    """A batch's codec, numbered as Pulsar's ``CompressionType`` and spelt as
    pulsar-client 3.x's Python enum (``ZLib``; ``ZLIB`` is the same member)."""

    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4
    ZLIB = 2  # Pulsar's protobuf spelling: an alias of ZLib


def codec(value: int | str) -> CompressionType:
    """The codec numbered (or named, in either spelling, any case) ``value``.

    Raises:
        InvalidArgument: no such codec.
    """
    if isinstance(value, str):
        for name, member in CompressionType.__members__.items():
            if name.upper() == value.upper():
                return member
        raise InvalidArgument(f"unknown compression type {value!r}: one of NONE, LZ4, ZLIB, ZSTD, SNAPPY")
    try:
        return CompressionType(value)
    except ValueError:
        raise InvalidArgument(
            f"unknown compression type {value}: one of 0 (NONE), 1 (LZ4), 2 (ZLIB), 3 (ZSTD), 4 (SNAPPY)"
        ) from None


def compress(kind: int, data: bytes) -> bytes:
    """``data`` compressed with the codec ``kind`` as Pulsar's clients compress it
    (``NONE``: ``data`` itself).

    Raises:
        InvalidArgument: an unknown codec.
    """
    kind = codec(kind)
    if kind is CompressionType.NONE:
        return data
    if kind is CompressionType.LZ4:
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    if kind is CompressionType.ZLib:
        return zlib.compress(data)
    if kind is CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))
    return bytes(cramjam.snappy.compress_raw(data))


def decompress(kind: int, data: bytes, uncompressed_size: int, max_size: int) -> bytes:
    """``data``, compressed with the codec ``kind``, decompressed to exactly
    ``uncompressed_size`` bytes (``NONE``: ``data``, which must be that long).

    Args:
        max_size: the most ``uncompressed_size`` may be (the broker's ``maxMessageSize``).

    Raises:
        InvalidArgument: an unknown codec, an ``uncompressed_size`` over ``max_size`` or
            below 0, or ``data`` that is not a payload of that codec decompressing to
            exactly ``uncompressed_size`` bytes.
    """
    kind = codec(kind)
    if uncompressed_size < 0 or uncompressed_size > max_size:
        raise InvalidArgument(
            f"a {kind.name.upper()}-compressed payload declaring {uncompressed_size} bytes uncompressed: "
            f"at most {max_size} are allowed"
        )
    if kind is CompressionType.NONE:
        if len(data) != uncompressed_size:
            raise InvalidArgument(f"an uncompressed payload of {len(data)} bytes declaring {uncompressed_size}")
        return data
    if kind is CompressionType.ZLib:
        return _inflate(data, uncompressed_size)
    out = bytearray(uncompressed_size)
    try:
        if kind is CompressionType.LZ4:
            n = cramjam.lz4.decompress_block_into(data, out)
        elif kind is CompressionType.ZSTD:
            n = cramjam.zstd.decompress_into(data, out)
        else:
            n = cramjam.snappy.decompress_raw_into(data, out)
    except cramjam.DecompressionError as exc:
        raise InvalidArgument(
            f"a {kind.name.upper()}-compressed payload of {len(data)} bytes that does not decompress to the "
            f"{uncompressed_size} bytes it declares: {exc}"
        ) from None
    if n != uncompressed_size:
        raise InvalidArgument(
            f"a {kind.name.upper()}-compressed payload that decompresses to {n} bytes, not the {uncompressed_size} it declares"
        )
    return bytes(out)


def _inflate(data: bytes, uncompressed_size: int) -> bytes:
    d = zlib.decompressobj()
    try:
        # One byte more than declared: a stream that has it is longer than it says.
        out = d.decompress(data, uncompressed_size + 1)
    except zlib.error as exc:
        raise InvalidArgument(f"a ZLIB-compressed payload of {len(data)} bytes that does not inflate: {exc}") from None
    if len(out) != uncompressed_size or not d.eof or d.unused_data:
        raise InvalidArgument(
            f"a ZLIB-compressed payload that is not one zlib stream of the {uncompressed_size} bytes it declares"
        )
    return out


def open_entry_batch(batch: Any, max_uncompressed: int = MAX_UNCOMPRESSED_SIZE) -> Any:
    """A parsed ``broker.proto`` ``EntryBatch`` with its messages readable: ``batch``
    itself when it is not compressed, else a new ``EntryBatch`` with the same header and
    the messages of its ``compressed_messages``, which it clears in ``batch`` (duck-typed: ``common`` knows no
    generated types; the SDK and the broker core both read entries through this).

    Raises:
        InvalidArgument: an unknown codec, a payload that does not decompress to its
            ``uncompressed_size`` within ``max_uncompressed``, decompressed bytes that are
            not ``num_messages`` messages and nothing else, or messages outside them.
    """
    if not batch.compression or batch.num_chunks_from_msg > 1:
        # A chunk holds its part of the whole message's compressed payload (Pulsar's
        # way): it does not decompress alone; the reassembled message does.
        return batch
    if batch.messages:
        raise InvalidArgument("a compressed entry with uncompressed messages beside its compressed ones")
    raw = decompress(batch.compression, batch.compressed_messages, batch.uncompressed_size, max_uncompressed)
    try:
        inner = type(batch).FromString(raw)
    except Exception as exc:  # protobuf's DecodeError (common/ imports no protobuf API)
        raise InvalidArgument(f"a compressed entry whose messages do not parse: {exc}") from None
    if [f.name for f, _ in inner.ListFields()] not in ([], ["messages"]) or len(inner.messages) != batch.num_messages:
        raise InvalidArgument(
            f"a compressed entry declaring {batch.num_messages} messages whose compressed part holds "
            f"{len(inner.messages)} and {len(inner.ListFields()) - bool(inner.messages)} other fields"
        )
    batch.ClearField("compressed_messages")  # spent: what is left is the header
    inner.MergeFrom(batch)
    return inner
