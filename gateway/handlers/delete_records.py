"""DeleteRecords (v0-2): move a partition's log start offset (whole ledgers before it go)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from kafka_wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    cache = TopicCache(ctx.services)
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                _, plog = await cache.log(t.name, p.partition_index)
                low = await plog.delete_records(p.offset)
            except KafkaApiError as e:
                parts.append(PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                             error_code=int(e.error_code)))
                continue
            parts.append(PartitionResult(partition_index=p.partition_index, low_watermark=low, error_code=0))
        out.append(TopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(topics=out)
