"""gateway/messages.py: a peeked message's X-Pulsar-* headers."""

from __future__ import annotations

import base64

from magnetar.gateway.messages import message_headers
from magnetar.proto.v1 import broker_pb2 as pb


def _peeked(**fields: object) -> pb.PeekMessageResponse:
    return pb.PeekMessageResponse(
        found=True, message_id=pb.MessageIdData(ledger_id=3, entry_id=4, partition=-1, batch_index=-1),
        publish_time_ms=1_714_557_600_250, **fields,  # type: ignore[arg-type]
    )


def test_the_ordering_key_and_schema_version_go_base64_under_pulsars_names():
    version = (1).to_bytes(8, "big")
    headers = message_headers(_peeked(message=pb.SingleMessage(payload=b"x", ordering_key=b"\x00\xffo"), schema_version=version))
    assert base64.b64decode(headers["X-Pulsar-Base64-ordering-key"]) == b"\x00\xffo"
    assert base64.b64decode(headers["X-Pulsar-Base64-schema-version-b64encoded"]) == version
    plain = message_headers(_peeked(message=pb.SingleMessage(payload=b"x")))
    assert "X-Pulsar-Base64-ordering-key" not in plain and "X-Pulsar-Base64-schema-version-b64encoded" not in plain
    assert plain["X-Pulsar-Message-ID"] == "3:4"


def test_a_compressed_chunk_says_how_to_open_its_message():
    """A chunk of a compressed message is its part of the compressed whole: the codec
    (Pulsar's name, ZLIB spelt as Pulsar's protobuf) and the whole's uncompressed size go
    with it; a chunk of an uncompressed message and an ordinary message carry neither."""
    chunk = dict(uuid="p-7", chunk_id=1, num_chunks_from_msg=3, total_chunk_msg_size=300_000)
    zlib_chunk = message_headers(_peeked(message=pb.SingleMessage(payload=b"part"), compression=2, uncompressed_size=900_000, **chunk))
    assert (zlib_chunk["X-Pulsar-compression"], zlib_chunk["X-Pulsar-uncompressed-size"]) == ("ZLIB", "900000")
    assert zlib_chunk["X-Pulsar-chunk-id"] == "1" and zlib_chunk["X-Pulsar-total-chunk-msg-size"] == "300000"
    for plain in (_peeked(message=pb.SingleMessage(payload=b"part"), **chunk), _peeked(message=pb.SingleMessage(payload=b"x"))):
        headers = message_headers(plain)
        assert "X-Pulsar-compression" not in headers and "X-Pulsar-uncompressed-size" not in headers
