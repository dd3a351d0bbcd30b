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
    assert base64.b64decode(headers["X-Pulsar-Base64-schema-version"]) == version
    plain = message_headers(_peeked(message=pb.SingleMessage(payload=b"x")))
    assert "X-Pulsar-Base64-ordering-key" not in plain and "X-Pulsar-Base64-schema-version" not in plain
    assert plain["X-Pulsar-Message-ID"] == "3:4"
