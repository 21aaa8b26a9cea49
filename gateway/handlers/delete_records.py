"""DeleteRecords (v0-2): move a partition's log start offset (whole ledgers before it go)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.partition.log import PartitionLog
from gateway.partition.lookup import TopicCache
from kafka_wire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult
DeleteRecordsPartition = DeleteRecordsRequest.DeleteRecordsPartition


async def _answer(p: DeleteRecordsPartition, plog: PartitionLog) -> PartitionResult:
    low = await plog.delete_records(p.offset)
    return PartitionResult(partition_index=p.partition_index, low_watermark=low, error_code=0)


def _failed(p: DeleteRecordsPartition, e: KafkaApiError) -> PartitionResult:
    return PartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=int(e.error_code))


async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(topics=await TopicCache(ctx.services.topics, ctx.services.partitions).per_partition(
        req.topics, lambda t: (t.name, t.partitions), lambda p: p.partition_index, _answer, _failed,
        lambda t, parts: TopicResult(name=t.name, partitions=parts)))
