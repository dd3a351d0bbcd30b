"""Property tests of metadata documents and tokens (issue 20): the znode codec, ledger
metadata, namespace policies, and JWT tokens and key settings as servers read them."""

from __future__ import annotations

import base64
import json

import oracles
import pytest
from fuzzsettings import FUZZ
from hypothesis import example, given
from hypothesis import strategies as st
from test_decoders import mutated, mutated_text

from magnetar.broker.deadletter import DEAD_LETTER_KEY
from magnetar.broker.namespace_policies import (
    DEDUPLICATION_KEY,
    DELAYED_KEY,
    DISPATCH_RATE_KEY,
    PUBLISH_RATE_KEY,
    QUOTAS_KEY,
    TTL_KEY,
)
from magnetar.common import tokens
from magnetar.common.errors import InvalidArgument
from magnetar.ledger.metadata import Fragment, LedgerMetadata, LedgerState
from magnetar.metadata import codec
from magnetar.metadata.tenants import RETENTION_KEY

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)
json_documents = st.dictionaries(st.text(max_size=8), json_values, max_size=5)


# -- the znode codec --------------------------------------------------------------------------------
@FUZZ
@given(json_documents)
def test_znode_codec_round_trips_and_is_canonical(doc: dict) -> None:
    oracles.znode_round_trip(doc)


@FUZZ
@given(st.one_of(st.binary(max_size=100), mutated(json_documents.map(codec.encode)), json_values.map(lambda v: json.dumps(v).encode())))
@example(b"[" * 100_000)  # regression: json.loads raised RecursionError, which escaped
@example(b'{"a":NaN}')  # regression: decoded, but encode() refused to write the document back
@example(b'{"a":1e400}')  # regression: read as inf, which encode() refuses
@example(b'{"a":' + b"1" * 5000 + b"}")  # more digits than int() converts
def test_znode_codec_decode_refuses_only_with_corrupt_metadata(data: bytes) -> None:
    oracles.znode_bytes(data)


# -- ledger metadata ------------------------------------------------------------------------------------
@st.composite
def ledger_metadata(draw: st.DrawFn) -> LedgerMetadata:
    e = draw(st.integers(1, 5))
    qw = draw(st.integers(1, e))
    qa = draw(st.integers(1, qw))
    bookie = st.text(min_size=1, max_size=12)
    firsts = sorted(draw(st.sets(st.integers(1, 2**40), max_size=3)))
    fragments = tuple(Fragment(f, tuple(draw(st.lists(bookie, min_size=e, max_size=e)))) for f in [0, *firsts])
    return LedgerMetadata(
        ensemble_size=e, write_quorum=qw, ack_quorum=qa, fragments=fragments,
        state=draw(st.sampled_from(LedgerState)), last_entry_id=draw(st.integers(-1, 2**62)),
        length=draw(st.integers(0, 2**62)), ctime_ms=draw(st.integers(0, 2**42)),
        properties=draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)),
        writer=draw(st.text(max_size=12)),
    )


@FUZZ
@given(ledger_metadata())
def test_ledger_metadata_round_trips(metadata: LedgerMetadata) -> None:
    oracles.ledger_metadata_round_trip(metadata)


@st.composite
def _damaged(draw: st.DrawFn, metadata: LedgerMetadata) -> dict:
    doc = metadata.to_dict()
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from([*doc, "fragments", "properties"]))
        if draw(st.booleans()):
            doc.pop(key, None)
        else:
            doc[key] = draw(json_values | st.floats())
    return doc


@FUZZ
@given(st.one_of(json_documents, ledger_metadata().flatmap(_damaged)))
@example({"ensemble_size": 1e400, "write_quorum": 1, "ack_quorum": 1, "state": "OPEN", "last_entry_id": -1, "length": 0, "fragments": []})  # regression: int(inf) raised OverflowError
@example({"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1, "state": "OPEN", "last_entry_id": -1, "length": 0,
          "properties": [], "fragments": [{"first_entry": 0, "bookies": ["b"]}]})  # regression: AttributeError (list.items)
def test_ledger_metadata_from_dict_refuses_only_with_invalid_argument(doc: dict) -> None:
    oracles.ledger_metadata_doc(doc)


# -- namespace policies ---------------------------------------------------------------------------
POLICY_KEYS = [
    RETENTION_KEY, QUOTAS_KEY, DELAYED_KEY, DEAD_LETTER_KEY, TTL_KEY, DEDUPLICATION_KEY, PUBLISH_RATE_KEY, DISPATCH_RATE_KEY,
]
policy_values = st.one_of(
    json_values,
    st.dictionaries(
        st.sampled_from(["retention_time_minutes", "retention_size_mb", "destination_storage", "message_age", "active",
                         "tick_time_ms", "max_delivery_delay_ms", "msg_rate", "byte_rate", "relative_to_publish_rate",
                         "period_s", "max_redeliver_count", "dead_letter_topic", "retry_letter_topic"]),
        json_scalars | st.fixed_dictionaries({"limit_size": json_scalars, "limit_time": json_scalars,
                                              "policy": st.sampled_from(["producer_exception", "x"])}),
        max_size=4,
    ),
)


@FUZZ
@given(st.one_of(json_documents, st.dictionaries(st.sampled_from(POLICY_KEYS), policy_values, max_size=4)))
def test_namespace_policies_from_document_refuses_only_with_corrupt_metadata(doc: dict) -> None:
    oracles.namespace_policies_doc(doc)


# -- tokens ---------------------------------------------------------------------------------------
SECRET = oracles.TOKEN_SECRET


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


valid_tokens = st.builds(
    lambda sub, claims: tokens.create_token(sub, SECRET, claims=claims),
    st.text(min_size=1, max_size=16),
    st.dictionaries(st.sampled_from(["role", "x", "aud", "iss"]), st.text(max_size=8), max_size=2),
)
jwt_parts = st.one_of(
    st.text(max_size=40),
    json_values.map(lambda v: _b64(json.dumps(v).encode())),
    st.binary(max_size=40).map(_b64),
)


@FUZZ
@given(valid_tokens)
def test_tokens_round_trip(token: str) -> None:
    oracles.token_round_trip(token)


@FUZZ
@given(st.one_of(st.text(max_size=80), st.lists(jwt_parts, min_size=1, max_size=4).map(".".join), mutated_text(valid_tokens)))
@example(_b64(b"[" * 5000) + ".e30.sig")
@example(_b64(b'{"alg":"HS256","typ":"JWT"}') + "." + _b64(b"[" * 5000) + ".sig")
@example(_b64(b'{"alg":"HS256","crit":[1]}') + ".e30.sig")
def test_tokens_refuse_only_with_authentication_error(token: str) -> None:
    oracles.token_text(token)


@FUZZ
@given(st.text(max_size=20))
@example("1" * 5000 + "s")  # regression: int() raised ValueError on 5000 digits
@example("٣s")  # a Unicode digit
def test_duration_refuses_only_with_invalid_argument(text: str) -> None:
    oracles.duration_text(text)


@FUZZ
@given(st.binary(min_size=32, max_size=80))
def test_secret_key_round_trips_through_base64_text(key: bytes) -> None:
    oracles.secret_key_round_trip(key)


@FUZZ
@given(st.binary(max_size=80))
def test_secret_key_decode_takes_any_bytes(data: bytes) -> None:
    oracles.secret_key_bytes(data)


@FUZZ
@given(st.one_of(st.text(max_size=60).map(lambda t: "data:" + t), st.text(max_size=40).map(lambda t: "data:;base64," + t)))
@example("data:;base64,é")  # regression: b64decode raised ValueError, not binascii.Error
@example("data:;base64,QUJD\x00")
def test_data_url_keys_refuse_only_with_invalid_argument(source: str) -> None:
    oracles.data_url_key(source)


def test_key_path_with_a_nul_byte_is_refused_with_invalid_argument() -> None:
    # Regression: Path.read_bytes raised ValueError (not OSError) for a NUL in the path.
    with pytest.raises(InvalidArgument):
        tokens.read_key_bytes("/tmp/key\x00file")
