"""The broker's topic admin RPCs for the gateway (a mixin of ``BrokerServicer``): wire ↔
:mod:`magnetar.broker.topic_admin` and message expiry in
:mod:`magnetar.broker.subscription_admin`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from magnetar.broker.compaction.admin import CompactionAdmin
from magnetar.broker.rpc import wire
from magnetar.broker.subscription_admin import SubscriptionAdmin
from magnetar.broker.topic_admin import TopicAdmin
from magnetar.common.grpcutil import rpc_errors
from magnetar.common.names import TopicName
from magnetar.managedledger.stats import CursorFigures
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.peek import PeekedMessage
    from magnetar.broker.service import BrokerService


class TopicAdminRpcs:
    service: BrokerService

    @property
    def _topics(self) -> TopicAdmin:
        return TopicAdmin(self.service)

    @rpc_errors
    async def UpdatePartitions(self, request: pb.UpdatePartitionsRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self._topics.update_partitions(request.topic, request.partitions)
        return pb.AdminResponse()

    @rpc_errors
    async def GetTopicProperties(self, request: pb.TopicPropertiesRequest, context: grpc.aio.ServicerContext) -> pb.Properties:
        return pb.Properties(properties=await self._topics.properties(request.topic))

    @rpc_errors
    async def UpdateTopicProperties(self, request: pb.TopicPropertiesRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self._topics.update_properties(request.topic, dict(request.properties))
        return pb.AdminResponse()

    @rpc_errors
    async def RemoveTopicProperty(self, request: pb.TopicPropertiesRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await self._topics.remove_property(request.topic, request.key)
        return pb.AdminResponse()

    @rpc_errors
    async def TerminateTopic(self, request: pb.TerminateTopicRequest, context: grpc.aio.ServicerContext) -> pb.MessageIdData:
        last = await self._topics.terminate(request.topic)
        partition = TopicName.parse(request.topic).partition_index
        return pb.MessageIdData(ledger_id=last.ledger_id, entry_id=last.entry_id, partition=partition, batch_index=-1)

    @rpc_errors
    async def GetMessageIdByTimestamp(
        self, request: pb.MessageIdByTimestampRequest, context: grpc.aio.ServicerContext,
    ) -> pb.MessageIdData:
        found = await self._topics.message_id_by_time(request.topic, request.timestamp_ms)
        partition = TopicName.parse(request.topic).partition_index
        return pb.MessageIdData(ledger_id=found.ledger_id, entry_id=found.entry_id, partition=partition, batch_index=-1)

    @rpc_errors
    async def GetMessageById(self, request: pb.GetMessageByIdRequest, context: grpc.aio.ServicerContext) -> pb.PeekMessageResponse:
        found = await self._topics.message_by_id(request.topic, request.ledger_id, request.entry_id)
        return _peeked(found, TopicName.parse(request.topic).partition_index)

    @rpc_errors
    async def GetInternalStats(self, request: pb.InternalStatsRequest, context: grpc.aio.ServicerContext) -> pb.InternalStats:
        f = await self._topics.internal_stats(request.topic)
        return pb.InternalStats(
            entries_added=f.entries_added, number_of_entries=f.number_of_entries, total_size=f.total_size,
            current_ledger_entries=f.current_ledger_entries, current_ledger_size=f.current_ledger_size,
            last_ledger_created_ms=f.last_ledger_created_ms, pending_adds=f.pending_adds,
            last_confirmed_entry=str(f.last_confirmed_entry), state=f.state,
            ledgers=[pb.LedgerStats(ledger_id=i.ledger_id, entries=i.entries, size=i.size, created_ms=i.created_ms) for i in f.ledgers],
            cursors=[_cursor(c) for c in f.cursors],
        )

    @rpc_errors
    async def TriggerCompaction(self, request: pb.CompactionRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        await CompactionAdmin(self.service).trigger(request.topic)
        return pb.AdminResponse()

    @rpc_errors
    async def GetCompactionStatus(self, request: pb.CompactionRequest, context: grpc.aio.ServicerContext) -> pb.CompactionStatus:
        status = await CompactionAdmin(self.service).status(request.topic)
        return pb.CompactionStatus(status=status.status, last_error=status.last_error)

    @rpc_errors
    async def ExpireMessages(self, request: pb.ExpireMessagesRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        admin = SubscriptionAdmin(self.service)
        if request.all_subscriptions:
            await admin.expire_all_subscriptions(request.topic, request.expire_time_s)
        else:
            await admin.expire_messages(request.topic, request.subscription, request.expire_time_s)
        return pb.AdminResponse()

    @rpc_errors
    async def PeekMessage(self, request: pb.PeekMessageRequest, context: grpc.aio.ServicerContext) -> pb.PeekMessageResponse:
        n = request.position
        if request.subscription:
            found = await self._topics.peek(request.topic, request.subscription, n)
        else:
            found = await self._topics.examine(request.topic, "earliest" if request.start == pb.EARLIEST else "latest", n)
        if found is None:
            return pb.PeekMessageResponse(found=False)
        return _peeked(found, TopicName.parse(request.topic).partition_index)

    @rpc_errors
    async def PeekMessages(self, request: pb.PeekMessageRequest, context: grpc.aio.ServicerContext) -> pb.PeekedMessages:
        found = await self._topics.peek_many(request.topic, request.subscription, request.position, request.count or 1)
        partition = TopicName.parse(request.topic).partition_index
        return pb.PeekedMessages(messages=[_peeked(m, partition) for m in found])


def _cursor(c: CursorFigures) -> pb.CursorStats:
    return pb.CursorStats(
        name=c.name, mark_delete_position=str(c.mark_delete_position), read_position=str(c.read_position),
        individually_deleted_messages=c.individually_deleted_messages, deleted_ranges=c.deleted_ranges,
        messages_consumed=c.messages_consumed, entries_since_first_not_acked=c.entries_since_first_not_acked,
        durable=c.durable, state="Closed" if c.closed else "Open",
        properties={str(k): str(v) for k, v in c.properties.items()}, active=c.active,
    )


def _peeked(found: PeekedMessage, partition: int) -> pb.PeekMessageResponse:
    batch = found.batch
    return pb.PeekMessageResponse(
        found=True,
        message_id=pb.MessageIdData(
            ledger_id=found.position.ledger_id, entry_id=found.position.entry_id, partition=partition,
            batch_index=found.batch_index,
        ),
        producer_name=batch.producer_name, publish_time_ms=batch.publish_time_ms, message=wire.single_message(found.message),
        batch_size=len(batch.messages), schema_version=batch.schema_version,
        uuid=batch.uuid, chunk_id=batch.chunk_id, num_chunks_from_msg=batch.num_chunks_from_msg,
        total_chunk_msg_size=batch.total_chunk_msg_size,
        # a compressed chunk stays compressed (its part of the whole): say how to open the whole
        compression=batch.compression if batch.num_chunks_from_msg > 1 else 0,
        uncompressed_size=batch.uncompressed_size if batch.num_chunks_from_msg > 1 and batch.compression else 0,
    )
