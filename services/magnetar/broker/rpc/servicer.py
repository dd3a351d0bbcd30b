"""The broker's gRPC servicer (``magnetar.v1.Broker``): the produce and consume streams,
lookups and the tenant, namespace and topic administration; the other admin RPCs are its
mixins (:mod:`.subscriptions`, :mod:`.topics`, :mod:`.namespaces`, :mod:`.permissions`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import grpc

from magnetar.broker.access import ProducerAccessMode
from magnetar.broker.authorization import Action, NamespaceAuth, Request
from magnetar.broker.authorizer import Authorizer
from magnetar.broker.consumer import BrokerConsumer, Delivery
from magnetar.broker.deadletter import DeadLetterPolicy
from magnetar.broker.deadletter import resolve as resolve_dead_letter
from magnetar.broker.namespace_stats import loaded_topic_stats
from magnetar.broker.nonpersistent.listing import TopicsMode
from magnetar.broker.rpc import schemas, wire
from magnetar.broker.rpc.bundles import BundleRpcs
from magnetar.broker.rpc.clusters import ClusterRpcs
from magnetar.broker.rpc.namespace_ops import NamespaceOpsRpcs
from magnetar.broker.rpc.namespaces import NamespacePolicyRpcs, policies_from_proto
from magnetar.broker.rpc.partition_admin import PartitionAdminRpcs
from magnetar.broker.rpc.permissions import PermissionRpcs
from magnetar.broker.rpc.schema_admin import SchemaAdminRpcs
from magnetar.broker.rpc.schemas import SchemaRpcs
from magnetar.broker.rpc.session import SessionRpcs
from magnetar.broker.rpc.streamqueue import StreamQueue
from magnetar.broker.rpc.subscriptions import SubscriptionAdminRpcs
from magnetar.broker.rpc.topics import TopicAdminRpcs
from magnetar.broker.service import BrokerService
from magnetar.broker.subscription import Subscription, check_read_compacted
from magnetar.broker.tenant_info import TenantInfo
from magnetar.broker.topic import PersistentTopic, PublishResult
from magnetar.broker.topic_admin import TopicAdmin
from magnetar.broker.topic_creates import create_topics
from magnetar.common import masks
from magnetar.common.errors import AuthorizationError, ConsumerBusy, InvalidArgument, MagnetarError
from magnetar.common.grpcauth import CALLER_ROLE
from magnetar.common.grpcutil import abort, rpc_errors
from magnetar.common.names import NamespaceName, TopicName, check_subscription_name
from magnetar.common.tasks import BackgroundTasks
from magnetar.managedledger.position import Position
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.proto.v1 import common_pb2

log = logging.getLogger(__name__)


def _error(exc: MagnetarError) -> common_pb2.Error:
    return common_pb2.Error(code=exc.code, message=exc.message, retriable=exc.retriable)


def _message_id(position: Position, partition: int) -> pb.MessageIdData:
    return pb.MessageIdData(ledger_id=position[0], entry_id=position[1], partition=partition, batch_index=-1)


class BrokerServicer(
    SubscriptionAdminRpcs, TopicAdminRpcs, NamespacePolicyRpcs, PermissionRpcs, SchemaAdminRpcs, SchemaRpcs,
    NamespaceOpsRpcs, PartitionAdminRpcs, ClusterRpcs, BundleRpcs, SessionRpcs,
    pb_grpc.BrokerServicer,
):
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        # Unary calls are checked by AuthorizationInterceptor; streams here.
        self.authorizer: Authorizer | None = service.authorizer if service.config.authorization_enabled else None

    async def _authorize(self, request: Request) -> str | None:
        """The caller's role, if it may do ``request``. Raises: AuthorizationError."""
        role = CALLER_ROLE.get()
        if self.authorizer is not None:
            await self.authorizer.check(role, request)
        return role

    def _watch_access(self, role: str | None, request: Request, on_refused: Callable[[MagnetarError], None]) -> asyncio.Task[None] | None:
        """While a stream is open, ask again every recheck interval; a refusal (a grant
        revoked, a role taken off the tenant's admins) ends the stream with it."""
        authorizer = self.authorizer
        if authorizer is None or role in authorizer.superusers:
            return None

        async def watch() -> None:
            while True:
                await asyncio.sleep(authorizer.recheck_interval_s)
                try:
                    allowed = await authorizer.allowed(role, request)
                except MagnetarError as exc:  # ZooKeeper away: the last decision stands
                    log.info("could not check %r's access to %s again: %s", role, request.what(), exc.message)
                    continue
                if not allowed:
                    log.warning("refused: role %r may no longer %s; its stream ends", role, request.what())
                    on_refused(AuthorizationError(f"role {role!r} is no longer authorized to {request.what()}"))
                    return

        return asyncio.create_task(watch(), name=f"access:{request.what()}")

    @rpc_errors
    async def Lookup(self, request: pb.LookupRequest, context: grpc.aio.ServicerContext) -> pb.LookupResponse:
        owner = await self.service.lookup(request.topic, request.authoritative)
        urls, session_address = await self.service.advertised_by(owner)
        return pb.LookupResponse(
            broker_address=owner, owned_here=owner == self.service.broker_id,
            pulsar_service_url=urls.url, pulsar_service_url_tls=urls.url_tls, session_address=session_address,
        )  # fmt: skip

    @rpc_errors
    async def GetPartitionedTopicMetadata(self, request: pb.PartitionedTopicMetadataRequest, context: grpc.aio.ServicerContext) -> pb.PartitionedTopicMetadata:
        if request.auto_create:  # a producer's or consumer's: may create a partitioned topic
            return pb.PartitionedTopicMetadata(partitions=await self.service.client_partitions(request.topic))
        return pb.PartitionedTopicMetadata(partitions=await self.service.partitions(request.topic))

    async def Produce(self, request_iterator: AsyncIterator[pb.ProduceRequest], context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ProduceResponse]:
        """One producer on its own stream (:meth:`produce_stream`); a refused open ends it with that status."""
        async for resp in ended_by_status(self.produce_stream(request_iterator), context):
            yield resp

    async def produce_stream(self, request_iterator: AsyncIterator[pb.ProduceRequest]) -> AsyncGenerator[pb.ProduceResponse, None]:
        """Serve one producer: its requests in, its responses out. A ``Produce`` stream
        and a session's producer handle (:mod:`.session`) both run this.

        Raises:
            MagnetarError: the open refused (nothing is left behind).
        """
        it = request_iterator.__aiter__()
        try:
            first = await it.__anext__()
            if first.WhichOneof("kind") != "open":
                raise InvalidArgument("a produce stream must start with OpenProducer")
            access = Request(Action.PRODUCE, str(TopicName.parse(first.open.topic)))
            role = await self._authorize(access)
            topic = await self.service.get_topic(first.open.topic)
            schema_version = await schemas.declare(self.service, topic.name, first.open, consumer=False)
            name = first.open.producer_name or self.service.new_producer_name()
            ended: asyncio.Future[MagnetarError] = asyncio.get_running_loop().create_future()
            pending: StreamQueue[tuple[int, asyncio.Future[PublishResult]] | None] = StreamQueue(1000)

            def on_close(error: MagnetarError) -> None:
                # The topic stopped being served here: take no more sends, then end the
                # stream with ``error`` as its last message (see _drain_until_done).
                _settle(ended, error)
                with contextlib.suppress(asyncio.QueueFull):  # a busy loop checks ``ended``
                    pending.put_nowait(None)

            opened = first.open
            admitted = await topic.open_producer(
                name, on_close, ProducerAccessMode.of(opened.access_mode),
                opened.topic_epoch if opened.HasField("topic_epoch") else None,
            )  # fmt: skip
            last = admitted.last_sequence_id
        except StopAsyncIteration:
            return
        service = self.service

        async def receive() -> None:
            try:
                async for req in it:
                    kind = req.WhichOneof("kind")
                    sends = [req.send] if kind == "send" else req.sends.batches if kind == "sends" else []
                    if ended.done() or not service.serving():  # the stream is ending
                        return
                    for s in sends:
                        if ended.done():  # closed (fenced out, unloaded) while a put below waited
                            return
                        chunk = (s.chunk_id, s.num_chunks_from_msg) if s.num_chunks_from_msg > 1 else None
                        published = topic.publish(name, s.entry, s.num_messages, s.lowest_sequence_id, s.highest_sequence_id,
                                                  maybe_delayed=not s.HasField("deliver_at_ms") or s.deliver_at_ms != 0,
                                                  chunk=chunk)
                        try:
                            await pending.put((s.request_id, published))
                        except asyncio.CancelledError:
                            _abandon((s.request_id, published))
                            raise
                    if topic.publish_limiter is not None and sends:
                        # Over the namespace's publishRate, the next request is not read
                        # until the bucket refills: the producer waits, nothing fails.
                        await topic.throttle_publish(
                            name, sum(s.num_messages for s in sends), sum(len(s.entry) for s in sends))
                    if sends and topic.may_hold_producers:  # a producer_request_hold quota exceeded: the same
                        await topic.hold_while_over_quota(name)
            finally:
                await pending.put(None)

        receiver = asyncio.create_task(receive())
        watcher = self._watch_access(role, access, on_close)
        item: tuple[int, asyncio.Future[PublishResult]] | None = None
        try:
            yield pb.ProduceResponse(opened=pb.ProducerOpened(
                producer_name=name, last_sequence_id=last, topic_epoch=admitted.topic_epoch, schema_version=schema_version,
            ))  # fmt: skip
            item = await pending.get()
            while item is not None and not ended.done():
                receipts = [await _receipt(item, topic.partition)]
                # Sends already settled behind it go out in the same stream message.
                held = False
                while not pending.empty():
                    item = pending.get_nowait()
                    if item is None or not item[1].done():
                        held = True
                        break
                    receipts.append(await _receipt(item, topic.partition))
                if len(receipts) == 1:
                    yield pb.ProduceResponse(receipt=receipts[0])
                else:
                    yield pb.ProduceResponse(receipts=pb.SendReceipts(receipts=receipts))
                if not held:
                    item = await pending.get()
            if not ended.done() and not service.serving():
                _settle(ended, service.not_serving(f"producer {name} on {topic.name}"))
            if ended.done():
                # In the stream, not as its status: the status of a call whose request
                # stream is still being read may not reach the client intact.
                yield pb.ProduceResponse(closed=_error(ended.result()))
                await _drain_until_done(receiver, pending, on_item=_abandon)
                return
            await receiver
        finally:
            receiver.cancel()
            # Sends no receipt will be written for (the client went away, the stream
            # ended): their outcomes are taken, or asyncio logs a refused one as an
            # exception never retrieved.
            _abandon(item)
            while not pending.empty():
                _abandon(pending.get_nowait())
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            topic.remove_producer(name, admitted.publisher)

    async def _dead_letter_policy(self, s: pb.Subscribe, name: TopicName) -> DeadLetterPolicy | None:
        """The retry/dead-letter policy a subscribe asks for, resolved and authorized.

        Its letter topics in the topic's own namespace come with consume. Elsewhere the
        moves would write there and make a subscription there (on the retry letter topic
        the consumer's own, on the dead letter topic the policy's initial subscription),
        so the role needs produce there and consume of that subscription: else a consumer
        could write into, and keep a backlog in, any namespace through its letters.

        Raises:
            InvalidArgument: a bad policy. AuthorizationError: a letter topic the role may
            not use. NamespaceNotFound.
        """
        if not (s.enable_retry or s.HasField("dead_letter_policy")):
            return None
        defaults = await self.service.dead_letter_defaults(str(name.namespace))
        asked = wire.dead_letter_asked(s.dead_letter_policy) if s.HasField("dead_letter_policy") else None
        policy = resolve_dead_letter(str(name), s.subscription, asked, defaults)
        letters = ((policy.retry_letter_topic, s.subscription), (policy.dead_letter_topic, policy.initial_subscription_name))
        for letter, kept_by in letters:
            if TopicName.parse(letter).namespace != name.namespace:
                await self._authorize(Request(Action.PRODUCE, letter))
                await self._authorize(Request(Action.CONSUME, letter, kept_by))
        return policy

    async def Consume(self, request_iterator: AsyncIterator[pb.ConsumeRequest], context: grpc.aio.ServicerContext) -> AsyncIterator[pb.ConsumeResponse]:
        """One consumer on its own stream (:meth:`consume_stream`); a refused subscribe ends it with that status."""
        async for resp in ended_by_status(self.consume_stream(request_iterator), context):
            yield resp

    async def consume_stream(self, request_iterator: AsyncIterator[pb.ConsumeRequest]) -> AsyncGenerator[pb.ConsumeResponse, None]:
        """Serve one consumer: its requests in, its responses out. A ``Consume`` stream
        and a session's consumer handle (:mod:`.session`) both run this.

        Raises:
            MagnetarError: the subscribe refused (nothing is left behind).
        """
        it = request_iterator.__aiter__()
        out: StreamQueue[pb.ConsumeResponse | MagnetarError | None] = StreamQueue()
        service = self.service
        try:
            first = await it.__anext__()
            if first.WhichOneof("kind") != "subscribe":
                raise InvalidArgument("a consume stream must start with Subscribe")
            s = first.subscribe
            check_subscription_name(s.subscription)
            sub_type = wire.subscription_type(s.type)
            initial = wire.initial_position(s.initial_position)
            key_shared = wire.key_shared(s, sub_type)
            name = TopicName.parse(s.topic)
            access = Request(Action.CONSUME, str(name), s.subscription)
            role = await self._authorize(access)
            # Every check runs before the topic is opened and the subscription made: a
            # refused subscribe leaves nothing behind (no cursor keeping a backlog).
            policy = await self._dead_letter_policy(s, name)
            topic = await self.service.get_topic(s.topic)
            await schemas.declare(self.service, topic.name, s, consumer=True)
            start = topic.position_of(wire.message_id(s.start_message_id)) if s.HasField("start_message_id") else None
            if s.read_compacted:  # refused before the subscription is made
                check_read_compacted(sub_type, topic)
            subscription = await topic.subscribe(
                s.subscription, sub_type, initial,
                start=start, inclusive=s.start_message_id_inclusive, durable=not s.non_durable,
                properties=dict(s.subscription_properties),
            )

            def sink(deliveries: list[Delivery]) -> None:
                if service.serving():  # else the topic is being unloaded: nothing goes out
                    out.put_nowait(pb.ConsumeResponse(deliveries=wire.deliveries(deliveries, topic.partition)))

            consumer = BrokerConsumer(
                s.consumer_name or self.service.new_producer_name(), s.priority_level,
                sink=sink,
                on_reset=lambda: out.put_nowait(pb.ConsumeResponse(reset=pb.CursorReset())),
                on_close=out.put_nowait,
                on_end_of_topic=lambda: out.put_nowait(pb.ConsumeResponse(end_of_topic=pb.EndOfTopic())),
                # Pulsar's maxUnackedMessagesPerConsumer: Shared and Key_Shared only (an
                # Exclusive or Failover consumer, a reader above all, may hold any number).
                max_unacked=self.service.config.max_unacked_messages_per_consumer
                if s.type in (pb.SHARED, pb.KEY_SHARED) else 0,
                key_shared=key_shared,
                read_compacted=s.read_compacted,
            )
            consumer.dead_letter = policy
            subscription.add_consumer(consumer, sub_type)
        except StopAsyncIteration:
            return

        moves = BackgroundTasks(f"consumer {consumer.name} on {topic.name}")

        async def reconsume(request: pb.ReconsumeLater) -> None:
            done = pb.RequestDone(request_id=request.request_id)
            try:
                await subscription.moves.reconsume_later(consumer, wire.message_id(request.message_id), request.delay_ms)
            except MagnetarError as exc:
                log.info("consumer %s on %s: reconsume_later refused: %s", consumer.name, topic.name, exc.message)
                done.error.CopyFrom(_error(exc))
            out.put_nowait(pb.ConsumeResponse(done=done))

        async def receive() -> None:
            try:
                async for req in it:
                    if req.WhichOneof("kind") == "reconsume_later":
                        # In the background: a move waits for another topic's write.
                        moves.spawn(reconsume(req.reconsume_later), name="reconsume-later")
                        continue
                    if not service.serving():  # the topic is being unloaded: the stream ends
                        out.put_nowait(service.not_serving(f"consumer {consumer.name} on {topic.name}"))
                        return
                    try:
                        if await _consume_request(req, topic, subscription, consumer, out):
                            return
                    except MagnetarError as exc:
                        # A bad ack or redelivery request is the client's bug: say so, go on.
                        log.warning("consumer %s on %s: %s", consumer.name, topic.name, exc.message)
            finally:
                out.put_nowait(None)

        receiver = asyncio.create_task(receive())
        watcher = self._watch_access(role, access, out.put_nowait)
        try:
            subscribed = pb.Subscribed(consumer_name=consumer.name)
            if policy is not None:
                subscribed.dead_letter_policy.CopyFrom(wire.dead_letter_policy(policy))
            yield pb.ConsumeResponse(subscribed=subscribed)
            while (resp := await out.get()) is not None:
                if isinstance(resp, MagnetarError):  # the stream ends (see Produce)
                    yield pb.ConsumeResponse(error=_error(resp))
                    await _drain_until_done(receiver, out)
                    return
                yield resp
        finally:
            receiver.cancel()
            if watcher is not None:
                watcher.cancel()
            await asyncio.gather(receiver, *(w for w in (watcher,) if w is not None), return_exceptions=True)
            # A move in flight finishes (publish, then ack) even when the stream is gone.
            await moves.wait()
            subscription.remove_consumer(consumer)

    @rpc_errors
    async def GetLastMessageId(self, request: pb.GetLastMessageIdRequest, context: grpc.aio.ServicerContext) -> pb.GetLastMessageIdResponse:
        topic = await TopicAdmin(self.service).topic(request.topic)
        ledger_id, entry_id, batch_index = await topic.last_message_id(request.read_compacted)
        mid = pb.MessageIdData(ledger_id=ledger_id, entry_id=entry_id, partition=topic.partition, batch_index=batch_index)
        return pb.GetLastMessageIdResponse(message_id=mid)

    # -- admin ---------------------------------------------------------------------
    @rpc_errors
    async def CreateTenant(self, request: pb.CreateTenantRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        if request.HasField("info"):
            clusters = await self.service.clusters.names()
            info = TenantInfo.of(request.info.admin_roles, request.info.allowed_clusters).checked(clusters)
        else:
            info = TenantInfo(allowed_clusters=(self.service.config.cluster_name,))
        await self.service.tenants.create_tenant(request.tenant, info.to_doc())
        return pb.AdminResponse()

    @rpc_errors
    async def GetTenant(self, request: pb.GetTenantRequest, context: grpc.aio.ServicerContext) -> pb.TenantInfo:
        info = TenantInfo.from_doc(await self.service.tenants.get_tenant(request.tenant))
        return pb.TenantInfo(admin_roles=info.admin_roles, allowed_clusters=info.allowed_clusters)

    @rpc_errors
    async def UpdateTenant(self, request: pb.UpdateTenantRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        clusters = await self.service.clusters.names()
        info = TenantInfo.of(request.info.admin_roles, request.info.allowed_clusters).checked(clusters)
        await self.service.tenants.update_tenant(request.tenant, lambda doc: doc | info.to_doc())
        self.service.authorizer.forget(tenant=request.tenant)
        return pb.AdminResponse()

    @rpc_errors
    async def DeleteTenant(self, request: pb.DeleteTenantRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.tenants.delete_tenant(request.tenant)
        self.service.authorizer.forget(tenant=request.tenant)
        return pb.AdminResponse()

    @rpc_errors
    async def ListTenants(self, request: pb.ListTenantsRequest, context: grpc.aio.ServicerContext) -> pb.NameList:
        return pb.NameList(names=await self.service.tenants.list_tenants())

    @rpc_errors
    async def CreateNamespace(self, request: pb.CreateNamespaceRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        permissions = None
        if request.HasField("permissions"):
            permissions = NamespaceAuth.of_grants(
                {r: a.names for r, a in request.permissions.roles.items()},
                {s: r.names for s, r in request.permissions.subscriptions.items()},
                {t: {r: a.names for r, a in g.roles.items()} for t, g in request.permissions.topics.items()},
                namespace=str(NamespaceName.parse(request.namespace)),
            )
        await self.service.create_namespace(
            request.namespace, policies_from_proto(request.policies), request.policies.bundles,
            permissions=permissions, replication_clusters=request.policies.replication_clusters,
            boundaries=list(request.policies.bundle_boundaries),
        )
        # A lookup refused before the namespace existed is cached: its grants apply now.
        self.service.authorizer.forget(namespace=request.namespace)
        return pb.AdminResponse()

    @rpc_errors
    async def DeleteNamespace(self, request: pb.DeleteNamespaceRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.tenants.delete_namespace(*_split_namespace(request.namespace))
        self.service.authorizer.forget(namespace=request.namespace)
        return pb.AdminResponse()

    @rpc_errors
    async def ListNamespaces(self, request: pb.ListNamespacesRequest, context: grpc.aio.ServicerContext) -> pb.NameList:
        return pb.NameList(names=await self.service.tenants.list_namespaces(request.tenant))

    @rpc_errors
    async def CreateTopic(self, request: pb.CreateTopicRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.create_topic(request.topic, request.partitions)
        return pb.AdminResponse()

    @rpc_errors
    async def CreateTopics(self, request: pb.CreateTopicsRequest, context: grpc.aio.ServicerContext) -> pb.CreateTopicsResponse:
        errors = await create_topics(request.namespace, request.topics, lambda t: self.service.create_topic(t, 0))
        return pb.CreateTopicsResponse(results=[
            pb.CreateTopicsResult(error_code=e.code, message=e.message) if e else pb.CreateTopicsResult() for e in errors])

    @rpc_errors
    async def DeleteTopic(self, request: pb.DeleteTopicRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.delete_topic(request.topic, force=request.force)
        return pb.AdminResponse()

    @rpc_errors
    async def UnloadTopic(self, request: pb.UnloadTopicRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.unload_topic(request.topic)
        return pb.AdminResponse()

    @rpc_errors
    async def UnloadNamespaceBundle(self, request: pb.UnloadNamespaceBundleRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self.service.unload_bundle(request.namespace, request.bundle)
        return pb.AdminResponse()

    @rpc_errors
    async def LookupBundle(self, request: pb.LookupBundleRequest, context: grpc.aio.ServicerContext) -> pb.LookupBundleResponse:
        owners = await self.service.bundle_owners(request.namespace, request.bundle)
        return pb.LookupBundleResponse(bundles=[pb.BundleOwner(bundle=b, broker_address=o) for b, o in owners])

    @rpc_errors
    async def ListTopics(self, request: pb.ListTopicsRequest, context: grpc.aio.ServicerContext) -> pb.NameList:
        if request.non_persistent:
            return pb.NameList(names=self.service.list_non_persistent_topics(request.namespace))
        if request.mode not in TopicsMode.__members__.values():
            raise InvalidArgument(f"unknown topic list mode {request.mode}; the modes are PERSISTENT, NON_PERSISTENT and ALL")
        return pb.NameList(names=await self.service.namespace_topics(request.namespace, TopicsMode(request.mode)))

    @rpc_errors
    async def GetTopicStats(self, request: pb.TopicStatsRequest, context: grpc.aio.ServicerContext) -> pb.TopicStats:
        # A partition of a partitioned topic exists by declaration: opened even if unused.
        return wire.topic_stats((await TopicAdmin(self.service).topic(request.topic)).stats())

    @rpc_errors
    async def GetNamespaceTopicStats(
        self, request: pb.NamespaceTopicStatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.NamespaceTopicStatsResponse:
        stats = loaded_topic_stats(self.service.topics, request.namespace)
        return pb.NamespaceTopicStatsResponse(topics=[wire.topic_stats(s) for s in stats])

    @rpc_errors
    async def GetLiveLoadReport(
        self, request: pb.LiveLoadReportRequest, context: grpc.aio.ServicerContext
    ) -> pb.LiveLoadReport:
        return pb.LiveLoadReport(json=json.dumps(self.service.load_report().doc()))


async def ended_by_status(responses: AsyncGenerator[Any, None], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    """``responses`` as a stream RPC's: a MagnetarError they raise ends the call with its status."""
    try:
        async with contextlib.aclosing(responses):  # its cleanup runs now, not when collected
            async for resp in responses:
                yield resp
    except MagnetarError as exc:
        await abort(context, exc)


async def _consume_request(
    req: pb.ConsumeRequest, topic: PersistentTopic, subscription: Subscription, consumer: BrokerConsumer,
    out: StreamQueue[pb.ConsumeResponse | MagnetarError | None],
) -> bool:
    """Apply one request of a consume stream; True when the stream is done (unsubscribed)."""
    kind = req.WhichOneof("kind")
    if kind == "flow":
        subscription.flow(consumer, req.flow.permits)
    elif kind == "ack":
        ack = req.ack
        if ack.message_ids:
            positions = [Position(m.ledger_id, m.entry_id) for m in ack.message_ids]
            subscription.ack(consumer, positions, cumulative=ack.type == pb.CUMULATIVE)
        if ack.batch_acks:
            subscription.ack_batch(
                consumer,
                [(Position(b.message_id.ledger_id, b.message_id.entry_id), b.batch_size, masks.from_bytes(b.ack_set)) for b in ack.batch_acks],
            )
    elif kind == "redeliver":
        ids = req.redeliver.message_ids
        subscription.send_back(consumer, [Position(m.ledger_id, m.entry_id) for m in ids] if ids else None)
    elif kind == "seek":
        seek = req.seek
        try:
            if seek.WhichOneof("target") == "timestamp_ms":
                position = await topic.position_for_time(seek.timestamp_ms)
            elif seek.HasField("message_id"):
                position = topic.position_of(wire.message_id(seek.message_id))
            else:
                raise InvalidArgument("a seek needs a message id or a timestamp")
            await subscription.reset_cursor(position)
        except MagnetarError as exc:
            out.put_nowait(pb.ConsumeResponse(done=pb.RequestDone(request_id=seek.request_id, error=_error(exc))))
        else:
            out.put_nowait(pb.ConsumeResponse(done=pb.RequestDone(request_id=seek.request_id)))
    elif kind == "unsubscribe":
        request_id = req.unsubscribe.request_id
        others = [c for c in subscription.consumers if c is not consumer]
        if others:
            busy = ConsumerBusy(f"subscription {subscription.name!r} on {topic.name} has other consumers; cannot unsubscribe")
            out.put_nowait(pb.ConsumeResponse(done=pb.RequestDone(request_id=request_id, error=_error(busy))))
            return False
        subscription.remove_consumer(consumer)
        try:
            if subscription.durable:
                await topic.delete_subscription(subscription.name, force=True)
        except MagnetarError as exc:
            out.put_nowait(pb.ConsumeResponse(done=pb.RequestDone(request_id=request_id, error=_error(exc))))
            return False
        out.put_nowait(pb.ConsumeResponse(done=pb.RequestDone(request_id=request_id)))
        return True
    return False


async def _receipt(item: tuple[int, asyncio.Future[PublishResult]], partition: int) -> pb.SendReceipt:
    request_id, published = item
    try:
        result = await published
    except MagnetarError as exc:
        return pb.SendReceipt(request_id=request_id, error=_error(exc))
    receipt = pb.SendReceipt(request_id=request_id, duplicate=result.duplicate)
    mid = receipt.message_id  # set in place: no message built and copied (the hot path)
    mid.ledger_id, mid.entry_id = result.position if result.position is not None else (-1, -1)
    mid.partition = partition
    mid.batch_index = -1
    return receipt


async def _drain_until_done(
    reader: asyncio.Task[None], queue: StreamQueue[Any], timeout_s: float = 10.0,
    on_item: Callable[[Any], None] | None = None,
) -> None:
    """Wait (bounded) for a stream's request reader to end, taking what it still queues
    (each item given to ``on_item``).

    A client ends its call once it has read the closing message, and then the pending
    read ends too. Cancelling that read instead left a later stream on the same
    connection stalled in a test, so the read is let to end.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not reader.done() and loop.time() < deadline:
        try:
            item = await asyncio.wait_for(queue.get(), 0.05)
        except TimeoutError:
            continue
        if on_item is not None:
            on_item(item)


def _abandon(item: tuple[int, asyncio.Future[PublishResult]] | None) -> None:
    """A send whose receipt will not be written: take its outcome when it comes."""
    if item is not None:
        item[1].add_done_callback(_take_outcome)


def _take_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _settle(future: asyncio.Future[MagnetarError], error: MagnetarError) -> None:
    if not future.done():
        future.set_result(error)


def _split_namespace(value: str) -> tuple[str, str]:
    parts = value.split("/")
    if len(parts) != 2 or not all(parts):
        raise InvalidArgument(f"a namespace is written tenant/namespace, got {value!r}")
    return parts[0], parts[1]
