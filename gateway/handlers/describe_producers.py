"""DescribeProducers (v0): the producers a partition knows, with their open transaction's first
offset and the coordinator epoch of their last marker."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.log import PartitionLog
from gateway.partition.lookup import TopicCache
from kafka_wire.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


async def _answer(index: int, plog: PartitionLog) -> PartitionResponse:
    states = [
        ProducerState(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                      last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                      coordinator_epoch=p.coordinator_epoch, current_txn_start_offset=p.current_txn_start_offset)
        for p in plog.active_producers()
    ]
    return PartitionResponse(partition_index=index, error_code=0, active_producers=states)


def _failed(index: int, e: KafkaApiError) -> PartitionResponse:
    return PartitionResponse(partition_index=index, error_code=int(e.error_code), error_message=e.message or None)


async def handle_describe_producers(
    ctx: RequestContext, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    return DescribeProducersResponse(topics=await TopicCache(ctx.services.topics, ctx.services.partitions).per_partition(
        req.topics, lambda t: (t.name, t.partition_indexes), int, _answer, _failed,
        lambda t, parts: TopicResponse(name=t.name, partitions=parts)))
