"""The gateway's namespace routes against a real broker: list, create (with Pulsar's
Policies), delete, policies, topics, and every policy sub-resource with its success and
error codes; then each enforced policy with real produce and consume through the SDK."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import httpx
import pytest
import pytest_asyncio
from gateway_support import GatewayCluster, unique

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient

BASE = "/admin/v2/namespaces"
TENANT_INFO = {"adminRoles": [], "allowedClusters": ["standalone"]}
BOUNDARIES = ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]


@pytest_asyncio.fixture
async def tenant(http: httpx.AsyncClient) -> AsyncIterator[str]:
    name = unique("ns-tenant")
    assert (await http.put(f"/admin/v2/tenants/{name}", json=TENANT_INFO)).status_code == 204
    yield name


@pytest_asyncio.fixture
async def namespace(http: httpx.AsyncClient, tenant: str) -> str:
    name = f"{tenant}/{unique('ns')}"
    assert (await http.put(f"{BASE}/{name}")).status_code == 204
    return name


@pytest_asyncio.fixture
async def admin(gateway_cluster: GatewayCluster) -> AsyncIterator[AdminClient]:
    async with AdminClient(gateway_cluster.service_url) as client:
        yield client


def reason(r: httpx.Response) -> str:
    body = r.json()
    assert set(body) == {"reason"}, body
    return str(body["reason"])


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


async def backlog(admin: AdminClient, topic: str, subscription: str) -> int:
    stats = await admin.topic_stats(topic)
    return next(s.backlog for s in stats.subscriptions if s.name == subscription)


# -- namespaces ---------------------------------------------------------------------------
async def test_namespace_lifecycle_with_pulsar_codes(http: httpx.AsyncClient, tenant: str, admin: AdminClient):
    ns = f"{tenant}/app"
    r = await http.put(f"{BASE}/{ns}")
    assert r.status_code == 204 and r.content == b""
    assert reason(await http.put(f"{BASE}/{ns}")).endswith("already exists")
    assert (await http.put(f"{BASE}/{ns}")).status_code == 409
    assert (await http.put(f"{BASE}/{tenant}/other")).status_code == 204
    assert (await http.get(f"{BASE}/{tenant}")).json() == [f"{tenant}/app", f"{tenant}/other"]

    missing = unique("nobody")
    r = await http.get(f"{BASE}/{missing}")
    assert r.status_code == 404 and "does not exist" in reason(r)
    r = await http.put(f"{BASE}/{missing}/ns")
    assert r.status_code == 404 and "does not exist" in reason(r)
    r = await http.put(f"{BASE}/{tenant}/b%20ad")
    assert r.status_code == 412 and reason(r).startswith("Namespace name is not valid")
    assert (await http.get(f"{BASE}/b%20ad")).status_code == 412

    policies = (await http.get(f"{BASE}/{ns}")).json()
    assert policies == {
        "retention_policies": None, "message_ttl_in_seconds": None, "backlog_quota_map": {},
        "deduplicationEnabled": None, "delayed_delivery_policies": None,
        "bundles": {"boundaries": BOUNDARIES, "numBundles": 4}, "magnetar_dead_letter_policy": None,
        "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
        "replication_clusters": [], "publishMaxMessageRate": {}, "topicDispatchRate": {}, "clusterDispatchRate": {},
        "inactive_topic_policies": None,
    }
    assert (await http.get(f"{BASE}/{ns}/topics")).json() == []

    # Topics: partitioned ones are listed by partition, as Pulsar lists them.
    await admin.create_topic(f"persistent://{ns}/plain")
    await admin.create_topic(f"persistent://{ns}/parts", partitions=2)
    assert (await http.get(f"{BASE}/{ns}/topics")).json() == [
        f"persistent://{ns}/parts-partition-0", f"persistent://{ns}/parts-partition-1", f"persistent://{ns}/plain",
    ]
    assert (await http.get(f"{BASE}/{ns}/topics", params={"mode": "NON_PERSISTENT"})).json() == []
    assert len((await http.get(f"{BASE}/{ns}/topics", params={"mode": "ALL", "includeSystemTopic": "true"})).json()) == 3
    assert (await http.get(f"{BASE}/{ns}/topics", params={"mode": "SOME"})).status_code == 400

    r = await http.delete(f"{BASE}/{ns}")
    # Pulsar's exact reason first (its admin clients show it), then which topics.
    assert r.status_code == 409 and reason(r).startswith(f"Cannot delete non empty namespace: namespace {ns} has ")
    assert "parts" in reason(r) and "plain" in reason(r)
    r = await http.delete(f"{BASE}/{ns}", params={"force": "true"})
    assert r.status_code == 405 and reason(r) == "Broker doesn't allow forced deletion of namespaces"
    await admin.delete_topic(f"persistent://{ns}/plain")
    await admin.delete_topic(f"persistent://{ns}/parts")
    r = await http.delete(f"{BASE}/{ns}", params={"authoritative": "false"})
    assert r.status_code == 204 and r.content == b""
    for call in (http.delete(f"{BASE}/{ns}"), http.get(f"{BASE}/{ns}"), http.get(f"{BASE}/{ns}/topics")):
        r = await call
        assert r.status_code == 404 and "does not exist" in reason(r)
    assert (await http.get(f"{BASE}/{tenant}")).json() == [f"{tenant}/other"]


async def test_create_with_policies_and_refusals_that_create_nothing(http: httpx.AsyncClient, tenant: str):
    body = {
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100},
        "message_ttl_in_seconds": 3600,
        "backlog_quota_map": {"destination_storage": {"limitSize": 10 * 1024 * 1024, "policy": "producer_exception"}},
        "deduplicationEnabled": False,
        "delayed_delivery_policies": {"active": True, "tickTime": 500, "maxDeliveryDelayInMillis": 60000},
        "bundles": {"numBundles": 4},
        "magnetar_dead_letter_policy": {"maxRedeliverCount": 5, "deadLetterTopic": "{topic}-dead"},
        "replication_clusters": ["standalone"],  # a Pulsar field Magnetar does not have: ignored
    }
    ns = f"{tenant}/with-policies"
    assert (await http.put(f"{BASE}/{ns}", json=body)).status_code == 204
    got = (await http.get(f"{BASE}/{ns}")).json()
    assert got["retention_policies"] == body["retention_policies"]
    assert got["message_ttl_in_seconds"] == 3600 and got["deduplicationEnabled"] is False
    assert got["backlog_quota_map"] == {"destination_storage": {
        "limit": 10 * 1024 * 1024, "limitSize": 10 * 1024 * 1024, "limitTime": -1, "policy": "producer_exception",
    }}
    assert got["delayed_delivery_policies"] == body["delayed_delivery_policies"]
    assert got["magnetar_dead_letter_policy"] == {
        "maxRedeliverCount": 5, "retryLetterTopic": None, "deadLetterTopic": "{topic}-dead", "initialSubscriptionName": None,
    }

    refused = [
        ({"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}}, 400, "single time or size limit"),
        ({"message_ttl_in_seconds": -5}, 412, "Invalid value for message TTL"),
        ({"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 1},
          "backlog_quota_map": {"destination_storage": {"limitSize": 2 * 1024 * 1024}}}, 412, "Backlog Quota exceeds"),
        ({"bundles": {"numBundles": 129}}, 412, "Invalid number of bundles"),  # loadBalancerNamespaceMaximumBundles
        ({"bundles": {"boundaries": ["0x00000000", "0x90000000", "0x80000000", "0xffffffff"], "numBundles": 3}},
         412, "Invalid number of bundles"),
        ({"backlog_quota_map": {"elsewhere": {"limitSize": 1}}}, 400, "Invalid request"),
        ({"deduplicationEnabled": "maybe"}, 400, "Invalid request"),
    ]
    for bad, status, why in refused:
        bad_ns = f"{tenant}/{unique('refused')}"
        r = await http.put(f"{BASE}/{bad_ns}", json=bad)
        assert (r.status_code, why in reason(r)) == (status, True), (bad, r.text)
        assert (await http.get(f"{BASE}/{bad_ns}")).status_code == 404
    assert (await http.get(f"{BASE}/{tenant}")).json() == [ns]


# -- policy sub-resources -----------------------------------------------------------------
SUBRESOURCES = [
    ("retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}, {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}),
    ("messageTTL", 120, 120),
    ("deduplication", False, False),
    ("delayedDelivery", {"active": False}, {"active": False, "tickTime": 0, "maxDeliveryDelayInMillis": 0}),
    ("publishRate", {"publishThrottlingRateInMsg": 1000},
     {"publishThrottlingRateInMsg": 1000, "publishThrottlingRateInByte": -1}),
    ("dispatchRate", {"dispatchThrottlingRateInByte": 1 << 40, "ratePeriodInSecond": 2},
     {"dispatchThrottlingRateInMsg": -1, "dispatchThrottlingRateInByte": 1 << 40, "relativeToPublishRate": False,
      "ratePeriodInSecond": 2}),
]


async def test_each_policy_reads_204_until_set_then_its_value_until_removed(http: httpx.AsyncClient, namespace: str):
    for segment, value, shown in SUBRESOURCES:
        url = f"{BASE}/{namespace}/{segment}"
        r = await http.get(url)
        assert (r.status_code, r.content) == (204, b""), segment
        r = await http.post(url, json=value)
        assert (r.status_code, r.content) == (204, b""), (segment, r.text)
        assert (await http.get(url)).json() == shown, segment
        r = await http.delete(url)
        assert r.status_code == 204, segment
        assert (await http.get(url)).status_code == 204, segment
    assert (await http.get(f"{BASE}/{namespace}")).json()["retention_policies"] is None


async def test_backlog_quotas_by_type_and_their_conflicts_with_retention(http: httpx.AsyncClient, namespace: str):
    url = f"{BASE}/{namespace}"
    assert (await http.get(f"{url}/backlogQuotaMap")).json() == {}
    assert (await http.post(f"{url}/retention", json={"retentionTimeInMinutes": 10, "retentionSizeInMB": 1})).status_code == 204
    r = await http.post(f"{url}/backlogQuota", json={"limitSize": 1024 * 1024, "policy": "producer_exception"})
    assert r.status_code == 412
    assert reason(r) == "Backlog Quota exceeds configured retention quota for namespace. Please increase retention quota and retry"
    r = await http.post(f"{url}/backlogQuota", json={"limit": 1000, "limitTime": 600, "policy": "consumer_backlog_eviction"})
    assert r.status_code == 412  # 600 s is not under 10 minutes
    assert (await http.post(f"{url}/backlogQuota", json={"limit": 1000, "policy": "consumer_backlog_eviction"})).status_code == 204
    r = await http.post(f"{url}/backlogQuota", params={"backlogQuotaType": "message_age"},
                        json={"limitTime": 3600, "policy": "producer_request_hold"})
    assert r.status_code == 204  # message_age quotas are not checked against retention
    assert (await http.get(f"{url}/backlogQuotaMap")).json() == {
        "destination_storage": {"limit": 1000, "limitSize": 1000, "limitTime": -1, "policy": "consumer_backlog_eviction"},
        "message_age": {"limit": -1, "limitSize": -1, "limitTime": 3600, "policy": "producer_request_hold"},
    }
    r = await http.post(f"{url}/retention", json={"retentionTimeInMinutes": 10, "retentionSizeInMB": 0})
    assert r.status_code == 400 and "single time or size limit" in reason(r)
    r = await http.post(f"{url}/retention", json={"retentionTimeInMinutes": -1, "retentionSizeInMB": -2})
    assert r.status_code == 400 and reason(r) == "Invalid retention policy: size limit must be >= -1"
    r = await http.delete(f"{url}/backlogQuota", params={"backlogQuotaType": "message_age"})
    assert r.status_code == 204
    assert list((await http.get(f"{url}/backlogQuotaMap")).json()) == ["destination_storage"]
    assert (await http.delete(f"{url}/backlogQuota")).status_code == 204
    assert (await http.get(f"{url}/backlogQuotaMap")).json() == {}
    r = await http.post(f"{url}/backlogQuota", params={"backlogQuotaType": "nope"}, json={"limitSize": 1})
    assert r.status_code == 400
    r = await http.post(f"{url}/backlogQuota", json={"limitSize": -7})
    assert r.status_code == 400 and "limitSize must be >= -1" in reason(r)
    r = await http.post(f"{url}/backlogQuota", json={"limitSize": 1, "policy": "drop_everything"})
    assert r.status_code == 400


async def test_retention_below_a_quota_is_a_precondition_failure(http: httpx.AsyncClient, namespace: str):
    url = f"{BASE}/{namespace}"
    assert (await http.post(f"{url}/backlogQuota", json={"limitSize": 5 * 1024 * 1024})).status_code == 204
    r = await http.post(f"{url}/retention", json={"retentionTimeInMinutes": -1, "retentionSizeInMB": 5})
    assert r.status_code == 412 and reason(r) == "Retention Quota must exceed configured backlog quota for namespace."
    assert (await http.get(f"{url}/retention")).status_code == 204  # nothing was written
    assert (await http.post(f"{url}/retention", json={"retentionTimeInMinutes": -1, "retentionSizeInMB": 6})).status_code == 204


async def test_bad_policy_values_and_missing_namespaces(http: httpx.AsyncClient, namespace: str, tenant: str):
    url = f"{BASE}/{namespace}"
    r = await http.post(f"{url}/messageTTL", json=-1)
    assert r.status_code == 412 and reason(r) == "Invalid value for message TTL, message TTL must >= 0"
    for segment, bad in (("messageTTL", "ten"), ("messageTTL", 2**31), ("deduplication", "yes"), ("deduplication", 1),
                         ("retention", [1, 2]), ("delayedDelivery", {"tickTime": -1}),
                         ("delayedDelivery", {"maxDeliveryDelayInMillis": "soon"}),
                         ("deadLetterPolicy", {"maxRedeliverCount": 0}),
                         ("deadLetterPolicy", {"deadLetterTopic": "a/b/c/d"}),
                         ("publishRate", {"publishThrottlingRateInMsg": -2}),
                         ("publishRate", {"publishThrottlingRateInMsg": 2**31}),
                         ("dispatchRate", {"ratePeriodInSecond": 0}),
                         ("dispatchRate", {"dispatchThrottlingRateInByte": -5})):
        r = await http.post(f"{url}/{segment}", json=bad)
        assert r.status_code == 400, (segment, bad, r.text)
        reason(r)
    r = await http.post(f"{url}/messageTTL", content=b"", headers={"content-type": "application/json"})
    assert r.status_code == 400
    missing = f"{tenant}/{unique('missing')}"
    for segment, value, _ in [*SUBRESOURCES, ("deadLetterPolicy", {"maxRedeliverCount": 3}, None)]:
        for call in (http.get(f"{BASE}/{missing}/{segment}"), http.post(f"{BASE}/{missing}/{segment}", json=value),
                     http.delete(f"{BASE}/{missing}/{segment}")):
            r = await call
            assert r.status_code == 404 and "does not exist" in reason(r), (segment, r.text)
    for call in (http.get(f"{BASE}/{missing}/backlogQuotaMap"), http.delete(f"{BASE}/{missing}/backlogQuota"),
                 http.post(f"{BASE}/{missing}/backlogQuota", json={"limitSize": 1})):
        assert (await call).status_code == 404
    assert (await http.get(f"{BASE}/{tenant}/b%20ad/retention")).status_code == 412
    # Nothing was set by the refusals.
    got = (await http.get(url)).json()
    assert got["message_ttl_in_seconds"] is None and got["deduplicationEnabled"] is None


async def test_dead_letter_defaults_as_magnetar_admin_prints_them(http: httpx.AsyncClient, namespace: str, admin: AdminClient):
    url = f"{BASE}/{namespace}/deadLetterPolicy"
    empty = {"maxRedeliverCount": None, "retryLetterTopic": None, "deadLetterTopic": None, "initialSubscriptionName": None}
    assert (await http.get(url)).json() == empty
    policy = {"maxRedeliverCount": 3, "retryLetterTopic": "{topic}-retry", "deadLetterTopic": "{topic}-{subscription}-dead",
              "initialSubscriptionName": "audit"}
    assert (await http.post(url, json=policy)).status_code == 204
    assert (await http.get(url)).json() == policy
    stored = await admin.dead_letter_policy(namespace)  # the same defaults the broker's RPC reads
    assert (stored.max_redeliver_count, stored.initial_subscription_name) == (3, "audit")
    assert (await http.get(f"{BASE}/{namespace}")).json()["magnetar_dead_letter_policy"] == policy
    assert (await http.delete(url)).status_code == 204
    assert (await http.get(url)).json() == empty
    assert (await http.post(url, json={"deadLetterTopic": "dlq"})).status_code == 204
    assert (await http.post(url, json={})).status_code == 204  # all null: removed
    assert (await http.get(url)).json() == empty


# -- enforcement, with real produce and consume ---------------------------------------------
async def test_message_ttl_expires_old_messages_on_every_subscription(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/ttl"
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared)
        await consumer.close()
        await admin.create_subscription(topic, "other", mg.MessageId.earliest)
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            await producer.send(b"old-%d" % i)
        assert await backlog(admin, topic, "s") == 3
        assert (await http.post(f"{BASE}/{namespace}/messageTTL", json=1)).status_code == 204

        async def expired() -> bool:
            return await backlog(admin, topic, "s") == 0 and await backlog(admin, topic, "other") == 0

        await until(expired)
        assert (await http.delete(f"{BASE}/{namespace}/messageTTL")).status_code == 204
        await producer.send(b"new")
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared)
        message = await consumer.receive(timeout_millis=10_000)
        assert message.data() == b"new"  # the expired ones are not delivered


async def test_deduplication_off_stores_a_resend_and_on_drops_it(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/dedup"
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, producer_name="p", batching_enabled=False)
        first = await producer.send(b"a", sequence_id=1)
        assert (await producer.send(b"a", sequence_id=1)).ledger_id() == -1  # the broker's default: on
        assert (await http.post(f"{BASE}/{namespace}/deduplication", json=False)).status_code == 204
        again = await producer.send(b"a", sequence_id=1)
        assert again.ledger_id() >= 0 and again != first  # stored a second time
        assert (await http.post(f"{BASE}/{namespace}/deduplication", json=True)).status_code == 204
        assert (await producer.send(b"a", sequence_id=1)).ledger_id() == -1
    assert (await admin.topic_stats(topic)).entries == 2


async def test_delayed_delivery_inactive_delivers_delayed_messages_at_once(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster,
):
    topic = f"persistent://{namespace}/delayed"
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared)
        producer = await client.create_producer(topic)
        await producer.send(b"held", deliver_after=timedelta(minutes=5))
        r = await http.post(f"{BASE}/{namespace}/delayedDelivery", json={"active": False, "tickTime": 1000})
        assert r.status_code == 204
        await producer.send(b"at-once", deliver_after=timedelta(minutes=5))
        message = await consumer.receive(timeout_millis=10_000)
        assert message.data() == b"at-once"  # the one held before the change keeps its time
        limited = {"active": True, "maxDeliveryDelayInMillis": 60_000}
        assert (await http.post(f"{BASE}/{namespace}/delayedDelivery", json=limited)).status_code == 204
        with pytest.raises(mg.InvalidArgument, match="Exceeds max allowed delivery delay of 60000 milliseconds"):
            await producer.send(b"too-late", deliver_after=timedelta(minutes=5))
        await producer.send(b"soon", deliver_after=timedelta(seconds=30))


async def test_a_backlog_quota_refuses_sends_with_producer_exception_until_consumers_catch_up(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/quota"
    quota = {"limitSize": 2000, "policy": "producer_exception"}
    assert (await http.post(f"{BASE}/{namespace}/backlogQuota", json=quota)).status_code == 204
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "s")
        producer = await client.create_producer(topic, batching_enabled=False)
        sent = 0
        try:
            while sent < 20:
                await producer.send(b"x" * 500)
                sent += 1
        except mg.ProducerBlockedQuotaExceeded as exc:
            assert "backlog quota of 2000 bytes" in exc.message
        assert 4 <= sent <= 5  # the send that took the backlog over 2000 bytes was the last stored
        assert (await admin.topic_stats(topic)).entries == sent
        for _ in range(sent):
            await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))

        async def accepted() -> bool:
            try:
                await producer.send(b"after")
            except mg.ProducerBlockedQuotaExceeded:
                return False
            return True

        await until(accepted)  # once the acknowledgements reached the broker


async def test_a_backlog_quota_with_eviction_moves_the_slow_subscription(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster, admin: AdminClient,
):
    topic = f"persistent://{namespace}/evict"
    async with mg.Client(gateway_cluster.service_url) as client:
        await (await client.subscribe(topic, "slow")).close()
        producer = await client.create_producer(topic, batching_enabled=False)
        for _ in range(20):
            await producer.send(b"y" * 500)
    assert await backlog(admin, topic, "slow") == 20
    quota = {"limitSize": 2000, "policy": "consumer_backlog_eviction"}
    assert (await http.post(f"{BASE}/{namespace}/backlogQuota", json=quota)).status_code == 204

    async def evicted() -> bool:
        return await backlog(admin, topic, "slow") <= 4

    await until(evicted)
    assert await backlog(admin, topic, "slow") >= 3  # the newest messages stay


# -- topic-level policies (/admin/v2/persistent/{t}/{ns}/{topic}/<policy>) ---------------
async def test_topic_policies_over_rest_override_the_namespaces_and_refuse_bad_input(
    http: httpx.AsyncClient, namespace: str,
):
    topic = f"/admin/v2/persistent/{namespace}/{unique('t')}"
    assert (await http.post(f"{BASE}/{namespace}/messageTTL", json=600)).status_code == 204
    for r in (await http.get(f"{topic}/messageTTL"), await http.post(f"{topic}/messageTTL", params={"messageTTL": 5}),
              await http.delete(f"{topic}/messageTTL")):  # as Pulsar's: the topic does not exist yet
        assert (r.status_code, "not found" in reason(r)) == (404, True), r.text
    assert (await http.put(topic)).status_code == 204
    r = await http.get(f"{topic}/messageTTL")
    assert (r.status_code, r.content) == (204, b"")  # the topic sets none
    assert (await http.get(f"{topic}/messageTTL", params={"applied": "true"})).json() == 600
    r = await http.post(f"{topic}/messageTTL", params={"messageTTL": 30})  # Pulsar's query, no body
    assert r.status_code == 204, r.text
    assert (await http.get(f"{topic}/messageTTL")).json() == 30
    assert (await http.get(f"{topic}/messageTTL", params={"applied": "true"})).json() == 30
    r = await http.post(f"{topic}/maxProducers", json=2)
    assert r.status_code == 204, r.text
    r = await http.post(f"{topic}/backlogQuota", params={"backlogQuotaType": "message_age"},
                        json={"limitTime": 60, "policy": "producer_exception"})
    assert r.status_code == 204, r.text
    before = {s: (await http.get(f"{topic}/{s}")).json() for s in ("messageTTL", "maxProducers", "backlogQuotaMap")}
    for segment, params, body, status, why in [
        ("messageTTL", {"messageTTL": -1}, None, 412, "message TTL must >= 0"),
        ("maxProducers", None, -1, 412, "maxProducers must be 0 or more"),
        ("retention", None, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}, 400, "Invalid retention policy"),
        ("deduplicationEnabled", None, "yes", 400, "valid boolean"),
    ]:
        r = await http.post(f"{topic}/{segment}", params=params, json=body)
        assert (r.status_code, why in reason(r)) == (status, True), (segment, r.text)
    assert {s: (await http.get(f"{topic}/{s}")).json() for s in before} == before  # nothing changed
    missing = f"/admin/v2/persistent/{namespace}-missing/t/messageTTL"
    assert (await http.post(missing, params={"messageTTL": 5})).status_code == 404
    assert (await http.delete(f"{topic}/messageTTL")).status_code == 204
    assert (await http.get(f"{topic}/messageTTL", params={"applied": "true"})).json() == 600  # the namespace's again
    assert (await http.delete(topic)).status_code == 204
    assert (await http.get(f"{topic}/maxProducers")).status_code == 404
    assert (await http.put(topic)).status_code == 204  # created again
    r = await http.get(f"{topic}/maxProducers")
    assert (r.status_code, r.content) == (204, b"")  # its policies went with the deleted one
