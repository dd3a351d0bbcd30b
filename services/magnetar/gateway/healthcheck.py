"""Pulsar's broker health check (``BrokersBase.healthCheck``): one message produced to a
health-check topic and read back through the brokers.

Pulsar's broker checks itself on its heartbeat namespace (``pulsar/<cluster>/<broker>``,
or ``pulsar/<broker>`` with ``topicVersion=V2``). The gateway serves the whole cluster and
a topic is served by whichever broker owns its bundle, so the check here proves the path
a client takes: a lookup, the owning broker, the bookies it writes to and a read back.
Its topic is ``persistent://pulsar/<cluster>/healthcheck`` in both versions (Magnetar
names namespaces in the two-part form only). The tenant ``pulsar`` (Pulsar's system
tenant) and the namespace are created on the first check that finds them missing, so
a probe needs no setup. Each check writes one small message; the topic keeps no
subscription, so retention trims it.
"""

from __future__ import annotations

import asyncio
import uuid

from magnetar.client.admin import AdminClient
from magnetar.client.aio import Client
from magnetar.common.errors import AlreadyExists, MagnetarError, NotFound, Timeout
from magnetar.proto.v1 import broker_pb2 as pb

HEARTBEAT_TENANT = "pulsar"
"""Pulsar's system tenant, which holds its heartbeat namespaces."""
TOPIC_LOCAL_NAME = "healthcheck"


def heartbeat_namespace(cluster: str) -> str:
    """The namespace of the cluster's health-check topic."""
    return f"{HEARTBEAT_TENANT}/{cluster}"


def health_check_topic(cluster: str) -> str:
    """``persistent://pulsar/<cluster>/healthcheck``."""
    return f"persistent://{heartbeat_namespace(cluster)}/{TOPIC_LOCAL_NAME}"


async def run_health_check(admin: AdminClient, client: Client, cluster: str, timeout_s: float) -> None:
    """Produce one message to the health-check topic and read it back by its id.

    Raises:
        MagnetarError: the message read back is not the one written.
        Timeout: not done within ``timeout_s``.
        MagnetarError: the produce or the read failed (the brokers' or bookies' error).
    """
    topic = health_check_topic(cluster)
    payload = f"healthcheck-{uuid.uuid4().hex}".encode()
    try:
        async with asyncio.timeout(timeout_s):
            try:
                producer = await client.create_producer(topic, batching_enabled=False)
            except NotFound:  # the tenant or namespace: create them, once, and try again
                await _ensure_namespace(admin, cluster)
                producer = await client.create_producer(topic, batching_enabled=False)
            try:
                message_id = await producer.send(payload)
            finally:
                await producer.close()
            reader = await client.create_reader(topic, message_id, start_message_id_inclusive=True)
            try:
                message = await reader.read_next()
            finally:
                await reader.close()
    except TimeoutError:
        raise Timeout(f"health check on {topic} took longer than {timeout_s:g} s") from None
    if message.message_id() != message_id or message.data() != payload:
        raise MagnetarError(
            f"health check on {topic}: read {message.message_id()} back instead of {message_id}"
        )


async def _ensure_namespace(admin: AdminClient, cluster: str) -> None:
    try:
        await admin.create_tenant(HEARTBEAT_TENANT, pb.TenantInfo(allowed_clusters=[cluster]))
    except AlreadyExists:
        pass
    try:
        await admin.create_namespace(heartbeat_namespace(cluster))
    except AlreadyExists:
        pass
