"""Hostile input for the gateway's WebSocket endpoints (issue 20), as pure generators over
a seeded ``random.Random``: query strings, text and binary frames, raw (torn, unmasked,
badly coded) WebSocket frames. test_websocket_fuzz.py sends them to a real gateway.

Each generator also says what it knows of its input (``Query.valid``, ``Frame.is_object``)
so the tests can hold the gateway to more than "did not crash"."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import struct
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""The SDK's default max message size: a bigger payload is refused (``send-error:8``)."""
WS_MAX_SIZE = 16 * 1024 * 1024
"""uvicorn's ``ws_max_size``: a bigger frame closes the socket with 1009."""

_B64 = re.compile(r"[A-Za-z0-9+/]*=*")
_UNICODE = ["", " ", "é", "名前", "\U0001f680", "\x00", "\ud800", "\udfff", "a\nb", "%00", "../..", "\\", '"']
_JUNK_STRINGS = ["", "x", "null", "true", "-1", "1e309", "NaN", "{", "[]", "%%%", "AAAA", "====", "A" * 5000]


def junk_text(rng: random.Random) -> str:
    """A short hostile string (escapes, surrogates, NUL, huge)."""
    pick = rng.random()
    if pick < 0.4:
        return rng.choice(_JUNK_STRINGS + _UNICODE)
    if pick < 0.7:
        return "".join(rng.choice(_UNICODE + ["a", "Z", "0", "/", "="]) for _ in range(rng.randint(1, 12)))
    return "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(1, 40)))


def junk_value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value, hostile where it can be."""
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 2**64, 10**30, rng.randint(-(10**6), 10**6)])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308, -1e-308, 3.0])
    if kind in (4, 5):
        return junk_text(rng)
    if kind == 6:
        return [junk_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {junk_text(rng): junk_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


# -- query strings -------------------------------------------------------------------
VALID, INVALID, MAYBE = "valid", "invalid", "maybe"


@dataclass
class Query:
    params: list[tuple[str, str]]
    tags: list[str]
    """Per parameter: VALID (the gateway must accept it), INVALID (must refuse the upgrade
    with 400) or MAYBE (either: the outcome depends on more than the value)."""

    @property
    def verdict(self) -> str:
        """VALID if every parameter is, INVALID if one is and none is MAYBE, else MAYBE."""
        if all(t == VALID for t in self.tags):
            return VALID
        if INVALID in self.tags and MAYBE not in self.tags:
            return INVALID
        return MAYBE


_INT_BAD = ["x", "1.5", "1e3", "0x10", " 1", "9" * 40, "--1", "+", "١٢", "1_000"]


def _int_param(rng: random.Random, low: int, high: int = 2**31 - 1) -> tuple[str, str]:
    """An integer parameter's value and its tag, given its accepted range."""
    pick = rng.random()
    if pick < 0.5:
        value = rng.choice([low, high, rng.randint(low, min(high, low + 5000))])
        return str(value), VALID
    if pick < 0.8:
        value = rng.choice([low - 1, high + 1, -(2**63), 2**63, 2**64, -(10**30)])
        return str(value), INVALID
    return rng.choice(_INT_BAD), INVALID


def _enum_param(rng: random.Random, good: list[str], refused: tuple[str, ...] = ()) -> tuple[str, str]:
    """A value of a Pulsar enum: ``good`` ones are taken; ``refused`` ones are Pulsar's
    too but ask for what the gateway does not do, so they are refused like bad ones."""
    if rng.random() < 0.6:
        value = rng.choice(good + list(refused))
        return value, INVALID if value in refused else VALID
    names = good + list(refused)
    return rng.choice([g.lower() for g in names] + [g.upper() + "x" for g in names] + ["x", "0", "null", "\u00e9"]), INVALID


def _encryption_param(rng: random.Random) -> tuple[str, str]:
    """``encryptionKeys`` / ``cryptoFailureAction``: there is no end-to-end encryption, so
    any value is refused; an empty one is no value."""
    text = rng.choice(["FAIL", "CONSUME", "DISCARD", "key1,key2", junk_text(rng)[:50]])
    return text, INVALID if text else VALID


def _bool_param(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.6:
        return rng.choice(["true", "false", "TRUE", "False"]), VALID
    return rng.choice(["1", "0", "yes", "t", "truee", "null"]), INVALID


def _name_param(rng: random.Random) -> tuple[str, str]:
    """Names are any text: the broker takes them (or refuses them, 400, e.g. a NUL)."""
    return junk_text(rng)[:200], MAYBE


def _common(rng: random.Random) -> tuple[str, tuple[str, str]]:
    if rng.random() < 0.5:
        return "token", (junk_text(rng)[:50], VALID)
    return f"unknown{rng.choice(['', 'Key', '[]', '%20'])}{rng.randint(0, 9)}", (junk_text(rng)[:50], VALID)


def producer_query(rng: random.Random) -> Query:
    choices: dict[str, Any] = {
        "producerName": lambda: (f"fz-{rng.getrandbits(40):x}", VALID) if rng.random() < 0.5 else _name_param(rng),
        # Short timeouts may time sends out: still valid parameters.
        "sendTimeoutMillis": lambda: _int_param(rng, 0),
        "batchingEnabled": lambda: _bool_param(rng),
        "batchingMaxMessages": lambda: _int_param(rng, 1),
        "maxPendingMessages": lambda: _int_param(rng, 1),
        "batchingMaxPublishDelay": lambda: _int_param(rng, 0),
        "messageRoutingMode": lambda: _enum_param(rng, ["SinglePartition", "RoundRobinPartition", "CustomPartition"]),
        "hashingScheme": lambda: _enum_param(rng, ["Murmur3_32Hash"], ("JavaStringHash",)),
        "compressionType": lambda: _enum_param(rng, ["NONE"], ("LZ4", "ZLIB", "ZSTD", "SNAPPY")),
        "encryptionKeys": lambda: _encryption_param(rng),
        "initialSequenceId": lambda: _int_param(rng, -1, 2**63 - 1),
    }
    return _query(rng, choices)


def _priority_level(rng: random.Random) -> tuple[str, str]:
    """A non-zero level is refused on a Shared subscription only (which the tags of one
    parameter cannot tell), so it may go either way."""
    value, tag = _int_param(rng, 0)
    return value, MAYBE if tag == VALID and int(value) != 0 else tag


def consumer_query(rng: random.Random) -> Query:
    def ack_timeout() -> tuple[str, str]:
        pick = rng.random()
        if pick < 0.3:
            return rng.choice(["0", "1000", str(2**31 - 1)]), VALID
        if pick < 0.6:
            return str(rng.randint(1, 999)), INVALID
        return _int_param(rng, 0)

    choices: dict[str, Any] = {
        "subscriptionType": lambda: _enum_param(rng, ["Exclusive", "Shared", "Failover", "Key_Shared"]),
        "subscriptionMode": lambda: ("Durable", VALID) if rng.random() < 0.4 else
        (rng.choice(["NonDurable", "durable", "x"]), INVALID),
        "receiverQueueSize": lambda: _int_param(rng, 0),
        "consumerName": lambda: _name_param(rng),
        "priorityLevel": lambda: _priority_level(rng),
        "ackTimeoutMillis": ack_timeout,
        "negativeAckRedeliveryDelay": lambda: _int_param(rng, 0),
        "maxRedeliverCount": lambda: _int_param(rng, 1),
        "deadLetterTopic": lambda: (f"persistent://public/default/fz-dlq-{rng.getrandbits(32):x}", VALID)
        if rng.random() < 0.5 else _name_param(rng),
        "pullMode": lambda: _bool_param(rng),
        "cryptoFailureAction": lambda: _encryption_param(rng),
    }
    return _query(rng, choices)


def reader_query(rng: random.Random, known_ids: list[str]) -> Query:
    def message_id() -> tuple[str, str]:
        pick = rng.random()
        if pick < 0.3:
            return rng.choice(["earliest", "latest"] + known_ids), VALID
        if pick < 0.6:
            text = junk_text(rng)[:100]
            if not text:
                return text, VALID  # no value: latest
            return text, MAYBE if _B64.fullmatch(text) else INVALID
        # Well-formed MessageIdData with random fields: partitions the topic lacks, huge ids.
        return base64.b64encode(random_id_bytes(rng)).decode(), MAYBE

    choices: dict[str, Any] = {
        "messageId": message_id,
        "readerName": lambda: _name_param(rng),
        "receiverQueueSize": lambda: _int_param(rng, 0),
        "cryptoFailureAction": lambda: _encryption_param(rng),
    }
    return _query(rng, choices)


def _query(rng: random.Random, choices: dict[str, Any]) -> Query:
    params: list[tuple[str, str]] = []
    tags: list[str] = []
    for key in rng.sample(sorted(choices), rng.randint(0, min(4, len(choices)))):
        value, tag = choices[key]()
        params.append((key, value))
        tags.append(tag)
    for _ in range(rng.choice([0, 0, 1, 2])):
        key, (value, tag) = _common(rng)
        params.append((key, value))
        tags.append(tag)
    if params and rng.random() < 0.1:
        # A repeated key: the first value counts (as Pulsar reads them).
        key, _ = params[0]
        params.append((key, junk_text(rng)[:20]))
        tags.append(VALID)
    return Query(params, tags)


# -- message ids ---------------------------------------------------------------------
def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def random_id_bytes(rng: random.Random) -> bytes:
    """A MessageIdData, mostly well formed, with hostile values; sometimes torn."""
    values = [0, 1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1, rng.getrandbits(64)]
    out = bytearray()
    for field in rng.sample([1, 2, 3, 4, 5, 6], rng.randint(1, 5)):
        out += _varint(field << 3) + _varint(rng.choice(values))
    if rng.random() < 0.2:
        out += _varint((rng.randint(1, 9) << 3) | rng.randint(0, 7)) + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 5)))
    if rng.random() < 0.15:
        out = out[: rng.randint(0, len(out))]
    return bytes(out)


def garbage_id(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.45:
        return base64.b64encode(random_id_bytes(rng)).decode()
    if pick < 0.55:
        return base64.b64encode(random_id_bytes(rng)).decode().rstrip("=")
    if pick < 0.65:
        return "A" * rng.choice([1023, 1024, 1025, 100_000])
    return junk_value(rng)


# -- frames --------------------------------------------------------------------------
@dataclass
class Frame:
    data: str | bytes
    """A text frame (str) or a binary frame (bytes)."""
    label: str
    """What kind of hostile input this is (for failure messages)."""

    def parsed(self) -> Any:
        """The JSON value the frame holds; a ``_NotJson`` marker when it holds none."""
        try:
            return json.loads(self.data)
        except (ValueError, UnicodeDecodeError):
            return NOT_JSON

    @property
    def is_object(self) -> bool:
        return isinstance(self.parsed(), dict)

    @property
    def bad_utf8(self) -> bool:
        """A text frame with lone surrogates: it goes out as invalid UTF-8 (close 1007)."""
        if not isinstance(self.data, str):
            return False
        try:
            self.data.encode()
        except UnicodeEncodeError:
            return True
        return False


class _NotJson:
    pass


NOT_JSON = _NotJson()


def _as_frame(rng: random.Random, obj: Any, label: str) -> Frame:
    text = json.dumps(obj)
    if rng.random() < 0.1:
        return Frame(text.encode(), f"binary {label}")
    return Frame(text, label)


def not_json(rng: random.Random) -> Frame:
    pick = rng.random()
    if pick < 0.3:
        good = json.dumps({"payload": "aGk=", "context": "c", "messageId": "CAAQAA=="})
        return Frame(good[: rng.randint(0, len(good) - 1)], "truncated JSON")
    if pick < 0.5:
        return Frame(rng.choice(["", " ", "{", "}", "{'a': 1}", "[1,", "nul", "NaN", "Infinity", "{\"a\":1}}",
                                 "\x00", "{\"payload\": \"\\ud800\"", "\ufeff{}"]), "not JSON")
    if pick < 0.8:
        return Frame(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))), "random binary")
    return Frame(junk_text(rng), "random text")


def non_object(rng: random.Random) -> Frame:
    return _as_frame(rng, rng.choice([None, 1, -1.5, "payload", [], [{"payload": "aGk="}], True, 2**70]), "JSON non-object")


def good_payload(rng: random.Random) -> bytes:
    """A payload marked with a random nonce, so stored messages can be told apart."""
    return b"fz-" + f"{rng.getrandbits(64):016x}".encode() + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))


def publish_frame(rng: random.Random, payload: bytes, context: str | None = None) -> Frame:
    obj: dict[str, Any] = {"payload": base64.b64encode(payload).decode()}
    if context is not None:
        obj["context"] = context
    return Frame(json.dumps(obj), "good publish")


def hostile_publish(rng: random.Random) -> Frame:
    """A producer frame: mostly a ``ProducerMessage`` with hostile fields."""
    pick = rng.random()
    if pick < 0.12:
        return not_json(rng)
    if pick < 0.2:
        return non_object(rng)
    obj: dict[str, Any] = {}
    payload = good_payload(rng)
    field_pick = rng.random()
    if field_pick < 0.15:
        pass  # payload missing
    elif field_pick < 0.35:
        obj["payload"] = rng.choice([junk_value(rng), "@@", "a", "ab=c", "YQ===", "YQ", " YQ==", "YQ==\n", "-_-_",
                                     base64.urlsafe_b64encode(b"\xfb\xff").decode()])
    else:
        obj["payload"] = base64.b64encode(payload).decode()
    fields = {
        "context": lambda: rng.choice([junk_value(rng), f"ctx-{rng.getrandbits(20)}"]),
        "key": lambda: junk_value(rng),
        "properties": lambda: rng.choice([junk_value(rng), {junk_text(rng): junk_value(rng) for _ in range(3)},
                                          {"a" * 1000: "b" * 10_000}]),
        "eventTime": lambda: rng.choice([junk_value(rng), "2024-05-01T10:00:00.250Z", "2024-05-01T10:00:00",
                                         "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+14:00", "2024-13-01T00:00:00Z",
                                         "1969-12-31T23:59:59.999Z"]),
        "deliverAt": lambda: rng.choice([junk_value(rng), 1, 2**63 - 1, "123", "-5", 1.0]),
        "deliverAfterMs": lambda: rng.choice([junk_value(rng), 1, 2**63 - 1, 10**12, "1", -1]),
        "replicationClusters": lambda: junk_value(rng),
        junk_text(rng): lambda: junk_value(rng),
    }
    for key in rng.sample(sorted(fields), rng.randint(0, 4)):
        obj[key] = fields[key]()
    return _as_frame(rng, obj, "hostile publish")


def huge_publish(rng: random.Random) -> Frame:
    """A payload over the max message size (refused), or a frame over uvicorn's max size
    (the socket is closed with 1009)."""
    if rng.random() < 0.5:
        size = MAX_MESSAGE_SIZE + rng.randint(1, 1024)
        label = "payload over the max message size"
    else:
        size = WS_MAX_SIZE * 3 // 4 + rng.randint(1, 1024)
        label = "frame over the max frame size"
    payload = base64.b64encode(b"\0" * size).decode()
    return Frame(json.dumps({"payload": payload, "context": "huge"}), label)


def hostile_command(rng: random.Random, real_ids: list[str]) -> Frame:
    """A consumer's or reader's frame: mostly a ``ConsumerCommand`` with hostile fields."""
    pick = rng.random()
    if pick < 0.1:
        return not_json(rng)
    if pick < 0.16:
        return non_object(rng)
    obj: dict[str, Any] = {}
    kinds = ["ack", "negativeAcknowledge", "permit", "isEndOfTopic", "unsubscribe"]
    if rng.random() < 0.8:
        obj["type"] = rng.choice(kinds * 3 + [junk_value(rng)])
    id_pick = rng.random()
    if id_pick < 0.3 and real_ids:
        obj["messageId"] = rng.choice(real_ids)
    elif id_pick < 0.85:
        obj["messageId"] = garbage_id(rng)
    if rng.random() < 0.4:
        obj["permitMessages"] = rng.choice([junk_value(rng), 1, 0, -1, 2**31, 2**63 - 1, 2**63, "5", "x"])
    if rng.random() < 0.2:
        obj[junk_text(rng)] = junk_value(rng)
    return _as_frame(rng, obj, "hostile command")


# -- raw WebSocket frames ------------------------------------------------------------
TEXT, BINARY, CLOSE, PING = 0x1, 0x2, 0x8, 0x9


def raw_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0, mask: bool = True) -> bytes:
    """One client WebSocket frame (RFC 6455 5.2), masked unless told otherwise."""
    head = bytearray([(0x80 if fin else 0) | (rsv & 0x7) << 4 | opcode & 0xF])
    bit = 0x80 if mask else 0
    n = len(payload)
    if n < 126:
        head.append(bit | n)
    elif n < 1 << 16:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if not mask:
        return bytes(head) + payload
    key = os.urandom(4)
    return bytes(head) + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def raw_garbage(rng: random.Random, frame: bytes) -> tuple[bytes, str]:
    """Bytes that break the WebSocket protocol, or a frame cut short."""
    pick = rng.random()
    if pick < 0.3:
        return frame[: rng.randint(1, max(1, len(frame) - 1))], "frame cut mid-message"
    if pick < 0.4:
        return raw_frame(TEXT, b"\xff\xfe" + os.urandom(4) + b"\xc0"), "text frame of invalid UTF-8"
    if pick < 0.5:
        return raw_frame(TEXT, b"{}", mask=False), "unmasked frame"
    if pick < 0.6:
        return raw_frame(rng.choice([0x3, 0x7, 0xB, 0xF]), b"x"), "reserved opcode"
    if pick < 0.7:
        return raw_frame(TEXT, b"{}", rsv=rng.randint(1, 7)), "reserved bits"
    if pick < 0.8:
        return raw_frame(TEXT, b'{"pay', fin=False) + raw_frame(TEXT, b'load":"aGk="}'), "text inside a fragmented message"
    if pick < 0.9:
        return raw_frame(CLOSE, rng.choice([b"\x03\xe8" + b"x" * 200, b"\x00", b"\x03\xed", b"\x03\xe8\xff"])), "bad close frame"
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200))), "random bytes"
