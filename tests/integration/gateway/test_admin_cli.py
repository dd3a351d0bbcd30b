"""``magnetar admin --admin-url``: every command through the gateway's REST API prints what
it prints over gRPC (run side by side on two tenants of their own), and fails the same
way; the gateway-only verbs (bookies, ledgers, dlq).

Each command is a process of its own, forked from a warm interpreter per door
(:class:`WarmMagnetar`): a hundred interpreter start-ups cost half a minute on two cores."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from gateway_support import GatewayCluster, unique

import magnetar.asyncio as mg
from magnetar.testing.shell import WarmMagnetar


@pytest.fixture(scope="module")
def shells() -> Iterator[tuple[WarmMagnetar, WarmMagnetar]]:
    """One warm ``magnetar admin`` per door, so the two doors run at once."""
    with WarmMagnetar("admin") as grpc_shell, WarmMagnetar("admin") as rest_shell:
        yield grpc_shell, rest_shell


def commands(tenant: str) -> list[list[str]]:
    ns, topic, parts = f"{tenant}/ns", f"persistent://{tenant}/ns/t", f"persistent://{tenant}/ns/p"
    return [
        ["tenants", "create", tenant], ["tenants", "list"], ["tenants", "get", tenant],
        ["tenants", "update", tenant, "--admin-roles", "ops,dev"], ["tenants", "get", tenant],
        ["tenants", "create", f"{tenant}-roles", "-r", "owner", "-c", "standalone"], ["tenants", "get", f"{tenant}-roles"],
        ["tenants", "delete", f"{tenant}-roles"], ["tenants", "create", f"{tenant}-all", "-r", "x"],
        ["tenants", "get", f"{tenant}-all"], ["tenants", "delete", f"{tenant}-all"], ["tenants", "update", tenant, "-c", "elsewhere"],  # refused: exit 1
        ["namespaces", "create", ns], ["namespaces", "list", tenant],
        ["namespaces", "get-retention", ns], ["namespaces", "set-retention", ns, "-t", "60", "-s", "10"],
        ["namespaces", "get-retention", ns],
        ["namespaces", "get-dead-letter-policy", ns],
        ["namespaces", "set-dead-letter-policy", ns, "--max-redeliver-count", "3", "--dead-letter-topic", "{topic}-dead"],
        ["namespaces", "get-dead-letter-policy", ns], ["namespaces", "set-dead-letter-policy", ns],
        ["namespaces", "get-dead-letter-policy", ns],
        ["namespaces", "get-publish-rate", ns], ["namespaces", "set-publish-rate", ns, "--msg-publish-rate", "1000"],
        ["namespaces", "get-publish-rate", ns], ["namespaces", "remove-publish-rate", ns],
        ["namespaces", "set-dispatch-rate", ns, "--msg-dispatch-rate", "500", "--byte-dispatch-rate", "1048576",
         "--dispatch-rate-period", "2"],
        ["namespaces", "get-dispatch-rate", ns], ["namespaces", "remove-dispatch-rate", ns],
        ["namespaces", "get-dispatch-rate", ns],
        ["namespaces", "set-publish-rate", ns, "--byte-publish-rate", "-5"],  # refused: exit 1
        ["topics", "create", topic], ["topics", "create-partitioned-topic", parts, "-p", "2"],
        ["topics", "list", ns],
        ["topics", "create-subscription", topic, "-s", "s1", "-m", "earliest"],
        ["topics", "create-subscription", parts, "-s", "s2"],
        ["topics", "subscriptions", topic], ["topics", "subscriptions", parts],
        ["topics", "skip", topic, "-s", "s1", "-n", "1"], ["topics", "clear-backlog", topic, "-s", "s1"],
        ["topics", "reset-cursor", topic, "-s", "s1", "-t", "1h"],
        ["topics", "reset-cursor", topic, "-s", "s1", "-m", "earliest"],
        ["topics", "stats", topic],
        ["topics", "unsubscribe", topic, "-s", "s1"], ["topics", "unload", topic],
        # errors: one line, exit 1
        ["tenants", "create", tenant], ["namespaces", "create", f"{tenant}/ns"], ["topics", "create", topic],
        ["topics", "subscriptions", f"persistent://{tenant}/ns/nosuch"], ["namespaces", "delete", ns],
        ["tenants", "delete", tenant],
        ["topics", "delete", topic], ["topics", "delete", f"{parts}-partition-0"],
    ]


def run(shell: WarmMagnetar, door: list[str], tenant: str, args: list[str]) -> tuple[int, str, int]:
    done = shell.run("admin", *door, *args)
    return done.returncode, done.stdout.replace(tenant, "TENANT"), len(done.stderr.strip().splitlines())


async def test_every_command_prints_the_same_through_rest(gateway_cluster: GatewayCluster,
                                                         shells: tuple[WarmMagnetar, WarmMagnetar]):
    grpc_tenant, rest_tenant = unique("grpc"), unique("rest")
    grpc_door = ["--url", gateway_cluster.broker.address]
    rest_door = ["--admin-url", gateway_cluster.url]
    for grpc_args, rest_args in zip(commands(grpc_tenant), commands(rest_tenant), strict=True):
        if grpc_args[:2] == ["topics", "skip"]:
            async with mg.Client(gateway_cluster.service_url) as client:
                for name in (grpc_args[2], rest_args[2]):
                    producer = await client.create_producer(name)
                    await producer.send(b"x")
                    await producer.send(b"y")
        # The two doors at once (each on a tenant of its own): half the wall time.
        by_grpc, by_rest = await asyncio.gather(
            asyncio.to_thread(run, shells[0], grpc_door, grpc_tenant, grpc_args),
            asyncio.to_thread(run, shells[1], rest_door, rest_tenant, rest_args),
        )
        if grpc_args[:2] == ["tenants", "list"]:  # each sees the other's tenant too
            by_grpc = (by_grpc[0], "\n".join(sorted(set(by_grpc[1].split()) - {rest_tenant})), by_grpc[2])
            by_rest = (by_rest[0], "\n".join(sorted(set(by_rest[1].split()) - {grpc_tenant})), by_rest[2])
        if grpc_args[:2] == ["topics", "stats"]:  # counters differ by timing; the shape must not
            assert json.loads(by_grpc[1]).keys() == json.loads(by_rest[1]).keys()
            continue
        assert by_rest == by_grpc, (grpc_args, by_grpc, by_rest)
        assert by_rest[2] == (1 if by_rest[0] else 0), (rest_args, by_rest)


async def test_gateway_only_verbs(gateway_cluster: GatewayCluster, shells: tuple[WarmMagnetar, WarmMagnetar]):
    door = ["--admin-url", gateway_cluster.url]
    magnetar = shells[1].run
    bookies = json.loads((await asyncio.to_thread(magnetar, "admin", *door, "bookies", "list")).stdout)
    assert len(bookies) == 2 and all(b["state"] == "writable" for b in bookies)
    async with mg.Client(gateway_cluster.service_url) as client:
        mid = await (await client.create_producer(f"persistent://public/default/{unique('cli')}")).send(b"x")
    ledger = json.loads((await asyncio.to_thread(magnetar, "admin", *door, "ledgers", "get", str(mid.ledger_id()))).stdout)
    assert ledger["ledgerId"] == mid.ledger_id() and ledger["ensemble_size"] == 2
    listed = await asyncio.to_thread(magnetar, "admin", *door, "dlq", "list", "public/default")
    assert listed.returncode == 0 and isinstance(json.loads(listed.stdout), list)
    missing = await asyncio.to_thread(magnetar, "admin", *door, "dlq", "replay", f"persistent://public/default/{unique('no')}-DLQ")
    assert missing.returncode == 1 and missing.stderr.startswith("magnetar admin: ") and "HTTP 404" in missing.stderr
    down = await asyncio.to_thread(magnetar, "admin", "--admin-url", "http://127.0.0.1:1", "bookies", "list")
    assert down.returncode == 1 and "cannot reach the gateway" in down.stderr and len(down.stderr.splitlines()) == 1


def _record(*fields: dict[str, object]) -> dict[str, object]:
    return {"type": "record", "name": "Order", "namespace": "acme", "fields": [{"name": "item", "type": "string"}, *fields]}


SCHEMA_FILES = {
    "v0.json": {"type": "AVRO", "schema": json.dumps(_record()), "properties": {"owner": "shop"}},
    "v1.json": {"type": "AVRO", "schema": json.dumps(_record({"name": "count", "type": "int", "default": 7}))},
    # BACKWARD: the new schema cannot read v1's data (note has no default)
    "incompatible.json": {"type": "AVRO", "schema": json.dumps(_record({"name": "note", "type": "string"}))},
    "broken.json": {"type": "AVRO", "schema": "{not avro"},
}


def schema_commands(tenant: str, files: str) -> list[list[str]]:
    ns, topic = f"{tenant}/ns", f"persistent://{tenant}/ns/orders"
    return [
        ["tenants", "create", tenant], ["namespaces", "create", ns],
        ["namespaces", "get-schema-compatibility-strategy", ns],
        ["namespaces", "set-schema-compatibility-strategy", ns, "-c", "backward"],
        ["namespaces", "get-schema-compatibility-strategy", ns],
        ["namespaces", "set-schema-compatibility-strategy", ns, "--compatibility", "SIDEWAYS"],  # exit 1
        ["namespaces", "get-is-allow-auto-update-schema", ns], ["namespaces", "set-is-allow-auto-update-schema", ns, "-d"],
        ["namespaces", "get-is-allow-auto-update-schema", ns],
        ["namespaces", "get-schema-validation-enforce", ns], ["namespaces", "set-schema-validation-enforce", ns, "--enable"],
        ["namespaces", "get-schema-validation-enforce", ns],
        ["schemas", "get", topic],  # exit 1: no schema
        ["schemas", "upload", topic, "-f", f"{files}/v0.json"], ["schemas", "upload", topic, "--filename", f"{files}/v1.json"],
        ["schemas", "upload", topic, "-f", f"{files}/incompatible.json"],  # exit 1
        ["schemas", "upload", topic, "-f", f"{files}/broken.json"],  # exit 1
        ["schemas", "upload", topic, "-f", f"{files}/absent.json"],  # exit 1
        ["schemas", "get", topic], ["schemas", "get", topic, "--version", "0"], ["schemas", "get", topic, "-a"],
        ["schemas", "get", topic, "-v", "0", "-a"],  # exit 1
        ["schemas", "compatibility", topic, "-f", f"{files}/v0.json"],
        ["schemas", "compatibility", topic, "-f", f"{files}/incompatible.json"],
        ["schemas", "delete", topic], ["schemas", "get", topic],  # exit 1: deleted
        ["schemas", "get", topic, "-v", "1"], ["schemas", "delete", topic, "--force"],
        ["schemas", "upload", topic, "-f", f"{files}/v1.json"], ["schemas", "get-version", topic, "-f", f"{files}/v1.json"],
        ["schemas", "get-version", topic, "-f", f"{files}/incompatible.json"],  # exit 1: never registered
    ]


async def test_schema_commands_print_the_same_through_both_doors(
    gateway_cluster: GatewayCluster, shells: tuple[WarmMagnetar, WarmMagnetar], tmp_path: Path,
) -> None:
    for name, doc in SCHEMA_FILES.items():
        (tmp_path / name).write_text(json.dumps(doc))
    grpc_tenant, rest_tenant = unique("grpc-schemas"), unique("rest-schemas")
    doors = (["--url", gateway_cluster.broker.address], ["--admin-url", gateway_cluster.url])
    outputs = []
    for shell, door, tenant in zip(shells, doors, (grpc_tenant, rest_tenant), strict=True):
        outputs.append([
            await asyncio.to_thread(run, shell, door, tenant, args) for args in schema_commands(tenant, str(tmp_path))
        ])
    by_grpc, by_rest = outputs
    for args, g, r in zip(schema_commands("TENANT", str(tmp_path)), by_grpc, by_rest, strict=True):
        assert _timeless(g) == _timeless(r), (args, g, r)
        assert g[2] == (1 if g[0] else 0), (args, g)  # an error: one line on stderr, exit 1
    printed = {" ".join(args[:2] + args[3:]).replace(str(tmp_path), "F"): (code, out)
               for args, (code, out, _) in zip(schema_commands("TENANT", str(tmp_path)), by_grpc, strict=True)}
    assert [code for code, _, _ in by_grpc] == [
        0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert printed["namespaces get-schema-compatibility-strategy"] == (0, "BACKWARD\n")
    assert printed["namespaces get-is-allow-auto-update-schema"] == (0, "false\n")
    assert printed["namespaces get-schema-validation-enforce"] == (0, "true\n")
    latest = json.loads(by_grpc[18][1])
    assert latest["version"] == 1 and latest["schemaInfo"]["schema"] == json.loads(SCHEMA_FILES["v1.json"]["schema"])
    assert latest["schemaInfo"]["name"] == "orders" and latest["schemaInfo"]["type"] == "AVRO"
    first = json.loads(printed["schemas get --version 0"][1])
    assert (first["schema"], first["properties"]) == (json.loads(SCHEMA_FILES["v0.json"]["schema"]), {"owner": "shop"})
    assert [v["version"] for v in json.loads(printed["schemas get -a"][1])] == [0, 1]
    assert json.loads(by_grpc[22][1]) == {"compatibility": True, "schemaCompatibilityStrategy": "BACKWARD"}
    assert json.loads(by_grpc[23][1]) == {"compatibility": False, "schemaCompatibilityStrategy": "BACKWARD"}
    assert json.loads(by_grpc[26][1])["schema"] == json.loads(SCHEMA_FILES["v1.json"]["schema"])  # readable after delete
    assert json.loads(by_grpc[29][1]) == {"version": 3}  # 0 and 1 uploaded, 2 the delete, 3 uploaded again


def _timeless(result: tuple[int, str, int]) -> tuple[int, str, int]:
    """A command's result without its registration times (each door's topic has its own)."""
    code, out, errors = result
    return code, re.sub(r'"timestamp": [0-9]+', '"timestamp": T', out), errors


def inspect_commands(tenant: str) -> list[list[str]]:
    """The partitioned-topic, inspection and cluster verbs (run after three messages were
    published to ``t``)."""
    ns, topic, parts = f"{tenant}/ns", f"persistent://{tenant}/ns/t", f"persistent://{tenant}/ns/p"
    return [
        ["topics", "create-partitioned-topic", parts, "-p", "2"], ["topics", "list-partitioned-topics", ns],
        ["namespaces", "topics", ns], ["namespaces", "policies", ns],
        ["topics", "get-partitioned-topic-metadata", parts], ["topics", "get-partitioned-topic-metadata", topic],
        ["topics", "update-partitioned-topic", parts, "-p", "3"], ["topics", "get-partitioned-topic-metadata", parts],
        ["topics", "update-partitioned-topic", topic, "-p", "3"],  # exit 1: not partitioned
        ["topics", "partitioned-stats", parts], ["topics", "partitioned-stats", parts, "--no-per-partition"],
        ["topics", "stats-internal", topic], ["topics", "last-message-id", topic], ["topics", "lookup", topic],
        ["topics", "examine-message", topic, "--initialPosition", "earliest", "-m", "2"],
        ["topics", "examine-message", topic],
        ["topics", "peek-messages", topic, "-s", "s1", "-n", "5"],
        ["topics", "expire-messages", topic, "-s", "s1", "-t", "0"],
        ["topics", "peek-messages", topic, "-s", "s1"],  # exit 1: all expired
        ["topics", "examine-message", topic, "-m", "0"],  # exit 1: bad number
        ["topics", "stats-internal", f"persistent://{tenant}/ns/nosuch"],  # exit 1: no such topic
        ["topics", "delete-partitioned-topic", parts], ["topics", "list-partitioned-topics", ns],
        ["clusters", "list"],
    ]


def _same_shape(out: str) -> str:
    """An output without what differs between two topics of their own: ledger ids, times,
    producer names."""
    out = re.sub(r'"(ledgerId|lastLedgerCreatedTimestamp|timestamp|publishTime|producerName)": ("[^"]*"|[0-9]+)',
                 r'"\1": X', out)
    out = re.sub(r'"(messageId|lastConfirmedEntry|markDeletePosition|readPosition)": "[0-9]+:', r'"\1": "L:', out)
    return out


async def test_inspection_and_partitioned_verbs_print_the_same_through_both_doors(
    gateway_cluster: GatewayCluster, shells: tuple[WarmMagnetar, WarmMagnetar],
) -> None:
    tenants = unique("grpc-inspect"), unique("rest-inspect")
    doors = (["--url", gateway_cluster.broker.address], ["--admin-url", gateway_cluster.url])
    async with mg.Client(gateway_cluster.service_url) as client:
        for shell, door, tenant in zip(shells, doors, tenants, strict=True):
            topic = f"persistent://{tenant}/ns/t"
            for args in (["tenants", "create", tenant], ["namespaces", "create", f"{tenant}/ns"],
                         ["topics", "create", topic], ["topics", "create-subscription", topic, "-s", "s1", "-m", "earliest"]):
                assert run(shell, door, tenant, args)[0] == 0, args
            producer = await client.create_producer(topic)
            for i in range(3):
                await producer.send(f"m{i}".encode(), partition_key=f"k{i}", properties={"i": str(i)})
    by_grpc, by_rest = await asyncio.gather(*(
        asyncio.to_thread(lambda s=shell, d=door, t=tenant: [run(s, d, t, a) for a in inspect_commands(t)])
        for shell, door, tenant in zip(shells, doors, tenants, strict=True)
    ))
    printed = {}
    for args, g, r in zip(inspect_commands("TENANT"), by_grpc, by_rest, strict=True):
        assert (g[0], _same_shape(g[1]), g[2]) == (r[0], _same_shape(r[1]), r[2]), (args, g, r)
        assert g[2] == (1 if g[0] else 0), (args, g)  # an error: one line on stderr, exit 1
        printed.setdefault(" ".join(args[:2] + args[3:]), g)
    assert [code for code, _, _ in by_grpc] == [0] * 8 + [1] + [0] * 9 + [1, 1, 1, 0, 0, 0]
    parts = "persistent://TENANT/ns/p"
    assert printed["topics list-partitioned-topics"][1] == f"{parts}\n"
    assert sorted(printed["namespaces topics"][1].split()) == [f"{parts}-partition-0", f"{parts}-partition-1",
                                                               "persistent://TENANT/ns/t"]
    assert json.loads(by_grpc[4][1]) == {"partitions": 2} and json.loads(by_grpc[7][1]) == {"partitions": 3}
    assert json.loads(by_grpc[5][1]) == {"partitions": 0}
    stats = json.loads(by_grpc[9][1])
    assert stats["metadata"]["partitions"] == 3 and len(stats["partitions"]) == 3
    assert json.loads(by_grpc[10][1])["partitions"] == {}
    internal = json.loads(by_grpc[11][1])
    assert internal["numberOfEntries"] == 3 and "s1" in internal["cursors"]
    assert json.loads(by_grpc[12][1])["entryId"] == 2
    owner = urlparse(by_grpc[13][1].strip())
    assert owner.scheme in ("pulsar", "magnetar") and owner.hostname == gateway_cluster.broker.address.split(":")[0]
    second, last = json.loads(by_grpc[14][1]), json.loads(by_grpc[15][1])
    assert (second["payload"], second["key"], second["properties"]) == ("m1", "k1", {"i": "1"})
    assert last["payload"] == "m2"
    assert [m["payload"] for m in json.loads(by_grpc[16][1])] == ["m0", "m1", "m2"]
    assert by_grpc[-2][1] == "" and by_grpc[-1][1] == "standalone\n"


async def test_gateway_cluster_verbs(gateway_cluster: GatewayCluster, shells: tuple[WarmMagnetar, WarmMagnetar]):
    """clusters get, brokers list|healthcheck and auditor go to the gateway through either door."""
    grpc = ["--url", gateway_cluster.broker.address, "--admin-url", gateway_cluster.url]
    magnetar = shells[0].run
    got = await asyncio.to_thread(magnetar, "admin", *grpc, "clusters", "get", "standalone")
    assert json.loads(got.stdout)["brokerServiceUrl"] == f"magnetar://{gateway_cluster.broker.address}"
    listed = await asyncio.to_thread(magnetar, "admin", *grpc, "brokers", "list")
    assert listed.stdout.split() == [gateway_cluster.broker.address]
    health = await asyncio.to_thread(magnetar, "admin", *grpc, "brokers", "healthcheck")
    assert (health.returncode, health.stdout) == (0, "ok\n"), health.stderr
    missing = await asyncio.to_thread(magnetar, "admin", *grpc, "clusters", "get", "elsewhere")
    assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1 and "HTTP 404" in missing.stderr
    auditor = await asyncio.to_thread(magnetar, "admin", *grpc, "auditor", "status")  # none runs in this cluster
    assert auditor.returncode == 1 and "no auditor is running" in auditor.stderr and len(auditor.stderr.splitlines()) == 1
