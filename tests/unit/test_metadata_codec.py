"""Metadata codec and znode paths (pure)."""

from __future__ import annotations

import pytest

from magnetar.common.errors import InvalidArgument, MetadataError
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import CorruptMetadata
from magnetar.metadata.paths import ZkPaths


def test_encode_is_compact_and_sorted() -> None:
    assert encode({"b": 1, "a": [1, "x"], "c": None}) == b'{"a":[1,"x"],"b":1,"c":null}'
    assert decode(encode({"k": {"n": 1.5}})) == {"k": {"n": 1.5}}


def test_empty_znode_is_an_empty_document() -> None:
    assert decode(b"") == {}


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"{not json", "valid JSON"), (b"\xff\xfe", "valid JSON"), (b"[1, 2]", "expected an object")],
)
def test_corrupt_data_is_a_clear_error(data: bytes, why: str) -> None:
    with pytest.raises(CorruptMetadata, match=why) as info:
        decode(data, "/m/ledgers/L1")
    assert "/m/ledgers/L1" in str(info.value)
    assert isinstance(info.value, MetadataError) and not info.value.retriable


@pytest.mark.parametrize("doc", [{"x": {1, 2}}, {"x": float("nan")}, {"x": b"raw"}])
def test_unencodable_documents_are_rejected(doc: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        encode(doc)


def test_paths() -> None:
    p = ZkPaths("/magnetar")
    assert p.bookies_available() == "/magnetar/bookies/available"
    assert p.bookie_available("10.0.0.1:3181") == "/magnetar/bookies/available/10.0.0.1:3181"
    assert p.bookies_readonly() == "/magnetar/bookies/readonly"
    assert p.bookie_readonly("h:1") == "/magnetar/bookies/readonly/h:1"
    assert p.ledger(42) == "/magnetar/ledgers/L0000000000000000042"
    assert p.ledger_id_generator() == "/magnetar/idgen/ledgers"
    assert ZkPaths("/a/b").ledgers() == "/a/b/ledgers"


@pytest.mark.parametrize("root", ["", "magnetar", "/", "/x/", "//x", "/x//y"])
def test_bad_roots_are_rejected(root: str) -> None:
    with pytest.raises(InvalidArgument):
        ZkPaths(root)


@pytest.mark.parametrize("bookie_id", ["", "a/b", "..", "x\n"])
def test_bad_names_are_rejected(bookie_id: str) -> None:
    with pytest.raises(InvalidArgument):
        ZkPaths().bookie_available(bookie_id)
    with pytest.raises(InvalidArgument):
        ZkPaths().ledger(-1)


def test_partitioned_topics_are_keyed_by_domain() -> None:
    p = ZkPaths("/m")
    # persistent: where they always were (a running cluster's znodes stay readable)
    assert p.partitioned_topic("t", "ns", "orders") == "/m/admin/partitioned-topics/t/ns/orders"
    assert p.partitioned_topic("t", "ns", "orders", "persistent") == "/m/admin/partitioned-topics/t/ns/orders"
    # non-persistent: a tree of their own, so no persistent topic's name can collide with it
    assert (
        p.partitioned_topic("t", "ns", "orders", "non-persistent")
        == "/m/admin/non-persistent-partitioned-topics/t/ns/orders"
    )
    assert not p.partitioned_topic("t", "ns", "non-persistent").startswith(p.partitioned_topics("t", "ns", "non-persistent"))
    with pytest.raises(InvalidArgument, match="unknown topic domain"):
        p.partitioned_topics("t", "ns", "persistent-ish")
