"""Topic and namespace names, bundles and key hashing (magnetar.common.names)."""

from __future__ import annotations

import copy
import pickle
import re
import struct

import pytest

from magnetar.common.bundles import bundle_boundaries, bundle_of, bundle_ranges, topic_hash
from magnetar.common.errors import InvalidArgument, InvalidTopicName
from magnetar.common.keyhash import key_hash, murmur3_32, partition_for_key
from magnetar.common.names import (
    MAX_LOCAL_NAME_LENGTH,
    MAX_SEGMENT_LENGTH,
    MAX_SUBSCRIPTION_NAME_LENGTH,
    NamespaceName,
    TopicName,
    check_subscription_name,
    validate_tenant,
)

# -- parsing ------------------------------------------------------------------------

VALID = [
    # input, full name, tenant, namespace, local name, partition index
    ("orders", "persistent://public/default/orders", "public", "default", "orders", -1),
    ("acme/prod/orders", "persistent://acme/prod/orders", "acme", "prod", "orders", -1),
    (
        "persistent://acme/prod/orders",
        "persistent://acme/prod/orders",
        "acme",
        "prod",
        "orders",
        -1,
    ),
    ("persistent://a-b_c/x=y:z.1/t", "persistent://a-b_c/x=y:z.1/t", "a-b_c", "x=y:z.1", "t", -1),
    (
        "t-partition-3",
        "persistent://public/default/t-partition-3",
        "public",
        "default",
        "t-partition-3",
        3,
    ),
    ("a/b/t-partition-0", "persistent://a/b/t-partition-0", "a", "b", "t-partition-0", 0),
    # Pulsar's rules: only a canonical non-negative int32 suffix names a partition.
    (
        "t-partition-01",
        "persistent://public/default/t-partition-01",
        "public",
        "default",
        "t-partition-01",
        -1,
    ),
    (
        "t-partition--1",
        "persistent://public/default/t-partition--1",
        "public",
        "default",
        "t-partition--1",
        -1,
    ),
    (
        "t-partition-",
        "persistent://public/default/t-partition-",
        "public",
        "default",
        "t-partition-",
        -1,
    ),
    (
        "t-partition-2147483648",
        "persistent://public/default/t-partition-2147483648",
        "public",
        "default",
        "t-partition-2147483648",
        -1,
    ),
    (
        "t-partition-2147483647",
        "persistent://public/default/t-partition-2147483647",
        "public",
        "default",
        "t-partition-2147483647",
        2147483647,
    ),
    (
        "t-partition-1x",
        "persistent://public/default/t-partition-1x",
        "public",
        "default",
        "t-partition-1x",
        -1,
    ),
    (
        "t-partition-1-partition-2",
        "persistent://public/default/t-partition-1-partition-2",
        "public",
        "default",
        "t-partition-1-partition-2",
        2,
    ),
    # Topic local names may use most characters.
    (
        "my topic:v1=ok?#&%",
        "persistent://public/default/my topic:v1=ok?#&%",
        "public",
        "default",
        "my topic:v1=ok?#&%",
        -1,
    ),
    (
        "héllo-wörld-日本",
        "persistent://public/default/héllo-wörld-日本",
        "public",
        "default",
        "héllo-wörld-日本",
        -1,
    ),
    ("...", "persistent://public/default/...", "public", "default", "...", -1),
]


@pytest.mark.parametrize(("text", "full", "tenant", "ns", "local", "index"), VALID)
def test_parse_valid(text: str, full: str, tenant: str, ns: str, local: str, index: int) -> None:
    name = TopicName.parse(text)
    assert str(name) == full
    assert (name.domain, name.tenant, name.namespace_part, name.local_name) == (
        "persistent",
        tenant,
        ns,
        local,
    )
    assert name.partition_index == index
    assert name.is_partition == (index >= 0)
    assert name.namespace == NamespaceName(tenant, ns)
    assert TopicName.parse(full) == name
    assert TopicName.parse(name) is name


INVALID = [
    # input, a fragment the message must contain
    ("", "empty"),
    ("   ", "empty"),
    ("persistent://", "3 '/'-separated parts"),
    ("persistent://a/b", "3 '/'-separated parts"),
    ("persistent://a/b/", "empty"),
    ("persistent:///b/t", "tenant is empty"),
    ("persistent://a//t", "namespace is empty"),
    ("a//t", "namespace is empty"),
    ("a/b", "3 '/'-separated parts"),
    ("a/b/c/d", "legacy form with a cluster"),
    ("persistent://a/cluster/b/t", "legacy form with a cluster"),
    ("kafka://a/b/t", "unknown topic domain 'kafka'"),
    ("://a/b/t", "unknown topic domain ''"),
    ("persistent://ten ant/ns/t", "not allowed: ' '"),
    ("persistent://tenant/n$s/t", "not allowed: '$'"),
    ("persistent://tenänt/ns/t", "not allowed: 'ä'"),
    ("persistent://./ns/t", "must not be '.'"),
    ("persistent://t/../x", "must not be '..'"),
    ("a/b/..", "must not be '..'"),
    ("a/b/.", "must not be '.'"),
    ("tab\there", "not allowed"),
    ("nul\x00", "not allowed"),
    ("del\x7f", "not allowed"),
    ("private\ue000use", "not allowed"),
    (" padded", "white space"),
    ("padded ", "white space"),
    ("x" * (MAX_LOCAL_NAME_LENGTH + 1), "characters long"),
    (f"persistent://{'t' * (MAX_SEGMENT_LENGTH + 1)}/ns/x", "characters long"),
    (f"persistent://t/{'n' * (MAX_SEGMENT_LENGTH + 1)}/x", "characters long"),
]


@pytest.mark.parametrize(("text", "fragment"), INVALID)
def test_parse_invalid(text: str, fragment: str) -> None:
    with pytest.raises(InvalidTopicName) as info:
        TopicName.parse(text)
    assert isinstance(info.value, InvalidArgument)
    assert fragment in info.value.message
    # Every message shows what a valid name looks like.
    assert "persistent://<tenant>/<namespace>/<topic>" in info.value.message


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(InvalidTopicName, match="must be a string"):
        TopicName.parse(42)  # type: ignore[arg-type]


def test_longest_allowed_names() -> None:
    t, ns, local = "t" * MAX_SEGMENT_LENGTH, "n" * MAX_SEGMENT_LENGTH, "x" * MAX_LOCAL_NAME_LENGTH
    name = TopicName.parse(f"persistent://{t}/{ns}/{local}")
    assert (name.tenant, name.namespace_part, name.local_name) == (t, ns, local)


def test_constructor_by_parts() -> None:
    name = TopicName(tenant="acme", namespace="prod", local_name="orders")
    assert str(name) == "persistent://acme/prod/orders"
    assert TopicName("persistent", "acme", "prod", "orders") == name
    assert TopicName(tenant="a", namespace="b", local_name="t-partition-2").partition_index == 2
    assert TopicName(tenant="a", namespace="b", local_name="t-partition-2", partition_index=2)
    with pytest.raises(InvalidTopicName, match=r"use TopicName.partition\(index\)"):
        TopicName(tenant="a", namespace="b", local_name="t", partition_index=2)
    with pytest.raises(InvalidTopicName, match="tenant is empty"):
        TopicName(namespace="b", local_name="t")
    with pytest.raises(InvalidTopicName, match="unknown topic domain 'kafka'"):
        TopicName("kafka", "a", "b", "t")


def test_non_persistent_names_keep_their_domain():
    name = TopicName.parse("non-persistent://a/b/t")
    assert (name.domain, name.is_persistent, str(name)) == ("non-persistent", False, "non-persistent://a/b/t")
    assert str(name.partition(3)) == "non-persistent://a/b/t-partition-3"
    assert name.partition(3).partitioned_topic_name == name
    assert name != TopicName.parse("persistent://a/b/t")
    assert TopicName.parse("a/b/t").is_persistent


# -- partitions -------------------------------------------------------------------


def test_partitions() -> None:
    base = TopicName.parse("acme/prod/orders")
    p2 = base.partition(2)
    assert str(p2) == "persistent://acme/prod/orders-partition-2"
    assert p2.partition_index == 2 and p2.is_partition and not base.is_partition
    assert p2.partitioned_topic_name == base
    assert base.partitioned_topic_name is base
    assert p2.partition(2) is p2
    assert TopicName.parse(str(p2)) == p2
    assert p2.namespace == base.namespace
    nested = TopicName.parse("t-partition-1-partition-2")
    assert str(nested.partitioned_topic_name) == "persistent://public/default/t-partition-1"


@pytest.mark.parametrize("index", [-1, 2**31, 1.0, True, "1", None])
def test_partition_rejects_bad_index(index: object) -> None:
    with pytest.raises(InvalidTopicName, match="partition index"):
        TopicName.parse("t").partition(index)  # type: ignore[arg-type]


def test_partition_of_another_partition_is_refused() -> None:
    with pytest.raises(InvalidTopicName, match="partition 1 of persistent://public/default/t"):
        TopicName.parse("t-partition-1").partition(2)


def test_partition_name_too_long() -> None:
    with pytest.raises(InvalidTopicName, match="characters long"):
        TopicName.parse("x" * MAX_LOCAL_NAME_LENGTH).partition(0)


# -- value semantics ----------------------------------------------------------------


def test_topic_names_are_frozen_hashable_and_picklable() -> None:
    name = TopicName.parse("a/b/t-partition-1")
    with pytest.raises(AttributeError):
        name.tenant = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del name.local_name
    assert hash(name) == hash(TopicName.parse("persistent://a/b/t-partition-1"))
    assert {name, TopicName.parse("persistent://a/b/t-partition-1")} == {name}
    assert name != "persistent://a/b/t-partition-1"
    for clone in (pickle.loads(pickle.dumps(name)), copy.copy(name), copy.deepcopy(name)):
        assert clone == name and clone.partition_index == 1
    assert repr(name) == "TopicName('persistent://a/b/t-partition-1')"


def test_topic_order_puts_partitions_after_their_base_numerically() -> None:
    names = [
        TopicName.parse(s) for s in ["b/x/t", "t-partition-10", "t-partition-2", "t", "s", "a/b/z"]
    ]
    assert [str(n) for n in sorted(names)] == [
        "persistent://a/b/z",
        "persistent://b/x/t",
        "persistent://public/default/s",
        "persistent://public/default/t",
        "persistent://public/default/t-partition-2",
        "persistent://public/default/t-partition-10",
    ]
    t = TopicName.parse("t")
    assert t < t.partition(0) <= t.partition(0) and t.partition(3) > t.partition(1) >= t
    with pytest.raises(TypeError):
        _ = t < "t"  # type: ignore[operator]


def test_namespace_names() -> None:
    ns = NamespaceName.parse("acme/prod")
    assert (ns.tenant, ns.namespace, str(ns)) == ("acme", "prod", "acme/prod")
    assert ns == NamespaceName("acme", "prod") and hash(ns) == hash(NamespaceName("acme", "prod"))
    assert sorted([NamespaceName("b", "a"), ns, NamespaceName("a", "z")]) == [
        NamespaceName("a", "z"),
        ns,
        NamespaceName("b", "a"),
    ]
    assert str(ns.topic("t")) == "persistent://acme/prod/t"
    assert pickle.loads(pickle.dumps(ns)) == ns
    with pytest.raises(AttributeError):
        ns.tenant = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("acme", "exactly one '/'"),
        ("a/b/c", "exactly one '/'"),
        ("/b", "tenant is empty"),
        ("a/", "namespace is empty"),
        ("a b/c", "not allowed"),
        ("a/..", "must not be '..'"),
    ],
)
def test_namespace_names_invalid(text: str, fragment: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        NamespaceName.parse(text)
    assert fragment in info.value.message
    assert "e.g. public/default" in info.value.message
    assert not isinstance(info.value, InvalidTopicName)


def test_validate_tenant() -> None:
    assert validate_tenant("a-b.c") == "a-b.c"
    for bad in ("", "a/b", "..", "x" * (MAX_SEGMENT_LENGTH + 1)):
        with pytest.raises(InvalidArgument, match="invalid tenant name"):
            validate_tenant(bad)


# -- bundles --------------------------------------------------------------------------


def _crc32_bitwise(data: bytes) -> int:
    """CRC-32 (IEEE, reflected) bit by bit: independent of zlib."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32_reference_check_value() -> None:
    assert _crc32_bitwise(b"123456789") == 0xCBF43926


def test_bundle_ranges_match_pulsar() -> None:
    assert bundle_ranges() == [
        "0x00000000_0x40000000",
        "0x40000000_0x80000000",
        "0x80000000_0xc0000000",
        "0xc0000000_0xffffffff",
    ]
    assert bundle_ranges(1) == ["0x00000000_0xffffffff"]
    assert bundle_ranges(3) == [
        "0x00000000_0x55555555",
        "0x55555555_0xaaaaaaaa",
        "0xaaaaaaaa_0xffffffff",
    ]
    for n in (1, 2, 3, 4, 7, 16, 100):
        # Pulsar's getBundles(n): step 2**32 // n, the last boundary 0xffffffff.
        expected, cur = [0], 0
        for i in range(n):
            cur += 2**32 // n
            expected.append(cur if i < n - 1 else 0xFFFFFFFF)
        assert bundle_boundaries(n) == expected
        assert len(bundle_ranges(n)) == n


@pytest.mark.parametrize("bad", [0, -1, 65537, 2.0, True])
def test_bundle_count_is_checked(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="number of bundles"):
        bundle_ranges(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="number of bundles"):
        bundle_of("t", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("topic", "hash_", "bundle4", "bundle16"),
    [
        ("orders", 0xB135B9DC, "0x80000000_0xc0000000", "0xb0000000_0xc0000000"),
        (
            "persistent://public/default/orders-partition-0",
            0x5AF6C8D5,
            "0x40000000_0x80000000",
            "0x50000000_0x60000000",
        ),
        ("acme/prod/payments", 0xA500482E, "0x80000000_0xc0000000", "0xa0000000_0xb0000000"),
        ("héllo", 0xCA21C604, "0xc0000000_0xffffffff", "0xc0000000_0xd0000000"),
    ],
)
def test_bundle_of_fixed_values(topic: str, hash_: int, bundle4: str, bundle16: str) -> None:
    full = str(TopicName.parse(topic))
    assert topic_hash(topic) == hash_ == _crc32_bitwise(full.encode("utf-8"))
    assert bundle_of(TopicName.parse(topic)) == bundle4
    assert bundle_of(topic, 16) == bundle16


def test_bundle_of_is_the_range_holding_the_hash() -> None:
    for n in (1, 3, 4, 5, 128):
        ranges = bundle_ranges(n)
        for i in range(200):
            topic = TopicName.parse(f"tenant/ns/topic-{i}")
            bundle = bundle_of(topic, n)
            assert bundle in ranges
            low, high = (int(x, 16) for x in bundle.split("_"))
            h = _crc32_bitwise(str(topic).encode())
            assert low <= h < high or (high == 0xFFFFFFFF and h == high)


def test_bundles_spread_topics() -> None:
    counts: dict[str, int] = {}
    for i in range(4000):
        b = bundle_of(f"t-{i}")
        counts[b] = counts.get(b, 0) + 1
    assert set(counts) == set(bundle_ranges())
    assert min(counts.values()) > 800


# -- key hashing ----------------------------------------------------------------------


def _murmur3_reference(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 written independently, block by block with struct."""
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) & m) | (x >> (32 - r))

    h = seed
    blocks = len(data) // 4
    for (k,) in struct.iter_unpack("<I", data[: blocks * 4]):
        k = rotl(k * 0xCC9E2D51 & m, 15) * 0x1B873593 & m
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & m
    tail = data[blocks * 4 :]
    k = 0
    if len(tail) == 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if len(tail) >= 1:
        k ^= tail[0]
        h ^= rotl(k * 0xCC9E2D51 & m, 15) * 0x1B873593 & m
    h ^= len(data)
    h ^= h >> 16
    h = h * 0x85EBCA6B & m
    h ^= h >> 13
    h = h * 0xC2B2AE35 & m
    return h ^ (h >> 16)


# Published MurmurHash3_x86_32 test vectors.
MURMUR_VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"abc", 0x9747B28C, 0xC84A62DD),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]


@pytest.mark.parametrize(("data", "seed", "expected"), MURMUR_VECTORS)
def test_murmur3_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected
    assert _murmur3_reference(data, seed) == expected


def test_murmur3_matches_reference_on_many_inputs() -> None:
    for n in range(64):
        data = bytes((i * 37 + n) & 0xFF for i in range(n))
        assert murmur3_32(data) == _murmur3_reference(data)
        assert murmur3_32(data, n * 7919) == _murmur3_reference(data, n * 7919)


@pytest.mark.parametrize(
    ("key", "hash_", "p16", "p7"),
    [
        ("user-1", 0x78A28763, 3, 5),
        ("user-2", 0x5E9747CB, 11, 1),
        ("", 0, 0, 0),
        ("key", 0x629C6A44, 4, 6),
        ("héllo", 0x3C9FA068, 8, 2),
        (b"\x00\xff", 0x5D4ECE94, 4, 3),
    ],
)
def test_partition_for_key_fixed_values(key: str | bytes, hash_: int, p16: int, p7: int) -> None:
    data = key.encode() if isinstance(key, str) else key
    assert key_hash(key) == hash_ == _murmur3_reference(data) & 0x7FFFFFFF
    assert partition_for_key(key, 16) == p16 == hash_ % 16
    assert partition_for_key(key, 7) == p7
    assert partition_for_key(key, 1) == 0


def test_key_hash_clears_the_sign_bit() -> None:
    # murmur3(b"\xff\xff\xff\xff") = 0x76293B50; find keys whose raw hash has the top bit set.
    high = [k for k in (f"k{i}" for i in range(200)) if murmur3_32(k.encode()) >= 2**31]
    assert high
    for k in high:
        assert key_hash(k) == murmur3_32(k.encode()) - 2**31
        assert 0 <= partition_for_key(k, 3) < 3


def test_str_and_bytes_keys_agree() -> None:
    assert partition_for_key("héllo", 10) == partition_for_key("héllo".encode(), 10)
    assert partition_for_key(bytearray(b"abc"), 10) == partition_for_key("abc", 10)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, None])
def test_partition_count_is_checked(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="number of partitions"):
        partition_for_key("k", bad)  # type: ignore[arg-type]


def test_key_type_is_checked() -> None:
    with pytest.raises(InvalidArgument, match="str or bytes"):
        partition_for_key(12, 4)  # type: ignore[arg-type]


def test_keys_spread_over_partitions() -> None:
    counts = [0] * 8
    for i in range(8000):
        counts[partition_for_key(f"user-{i}", 8)] += 1
    assert min(counts) > 800


# -- subscription names -------------------------------------------------------------


@pytest.mark.parametrize("name", ["sub", "my sub", "ünïcödé-🙂", "a" * MAX_SUBSCRIPTION_NAME_LENGTH, "-DLQ-sub"])
def test_good_subscription_names(name: str) -> None:
    assert check_subscription_name(name) == name


@pytest.mark.parametrize(("name", "reason"), [
    ("", "is required"),
    ("a/b", "must not"),
    (".", "must not"),
    ("..", "must not"),
    ("a\x00b", "it has '\\x00'"),
    ("tab\there", "it has '\\t'"),
    ("private\ue000use", "it has '\\ue000'"),
    ("a" * (MAX_SUBSCRIPTION_NAME_LENGTH + 1), f"{MAX_SUBSCRIPTION_NAME_LENGTH + 1:,} characters long"),
    # what the fuzzer sent in a dead-letter policy: a znode path over ZooKeeper's 1 MB limit
    ("}" * 1_048_000, "1,048,000 characters long"),
])  # fmt: skip
def test_bad_subscription_names_are_refused_with_the_reason(name: str, reason: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(reason)) as refused:
        check_subscription_name(name)
    assert len(refused.value.message) < 300
