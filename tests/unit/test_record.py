import struct
import zlib

import pytest

from magnetar.bookie.record import HEADER_SIZE, CorruptRecord, decode, encode_add, header_of


def test_encode_layout_byte_for_byte():
    rec = encode_add(7, 3, 2, b"abc")
    body = struct.pack("<BQqq", 1, 7, 3, 2) + b"abc"
    assert rec == struct.pack("<II", len(body), zlib.crc32(body)) + body
    assert len(rec) == HEADER_SIZE + 3


def test_roundtrip_and_offsets():
    buf = encode_add(1, 0, -1, b"x" * 10) + encode_add(1, 1, 0, b"")
    r0, off = decode(buf)
    r1, end = decode(buf, off)
    assert (r0.ledger_id, r0.entry_id, r0.lac, r0.payload) == (1, 0, -1, b"x" * 10)
    assert (r1.entry_id, r1.lac, r1.payload, end) == (1, 0, b"", len(buf))
    assert header_of(buf[off:]) == (1, 1, 0)


@pytest.mark.parametrize("cut", [0, 3, 8, 20, HEADER_SIZE, HEADER_SIZE + 5])
def test_torn_record_is_rejected(cut):
    rec = encode_add(9, 9, 8, b"payload!!")
    with pytest.raises(CorruptRecord):
        decode(rec[:cut])


@pytest.mark.parametrize("byte", [4, 8, 9, 17, 30, 35])
def test_any_flipped_bit_is_rejected(byte):
    rec = bytearray(encode_add(9, 9, 8, b"payload!!"))
    rec[byte] ^= 0x10
    with pytest.raises(CorruptRecord):
        decode(bytes(rec))


def test_zero_filled_space_is_not_a_record():
    with pytest.raises(CorruptRecord):
        decode(bytes(64))
