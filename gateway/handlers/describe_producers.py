"""DescribeProducers (v0): the idempotent producers a partition knows."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from kafka_wire.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


async def handle_describe_producers(
    ctx: RequestContext, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    cache = TopicCache(ctx.services)
    out = []
    for t in req.topics:
        parts = []
        for index in t.partition_indexes:
            try:
                _, plog = await cache.log(t.name, index)
            except KafkaApiError as e:
                parts.append(PartitionResponse(partition_index=index, error_code=int(e.error_code),
                                               error_message=e.message or None))
                continue
            states = [
                ProducerState(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                              last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                              coordinator_epoch=-1, current_txn_start_offset=-1)
                for p in plog.active_producers()
            ]
            parts.append(PartitionResponse(partition_index=index, error_code=0, active_producers=states))
        out.append(TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(topics=out)
