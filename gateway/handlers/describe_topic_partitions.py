"""DescribeTopicPartitions (v0): the Java admin's describeTopics since Kafka 3.7. Partitions as
Metadata reports them (handlers.metadata.partition_metadata), paginated as Kafka's
DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse do: topics in
name order from the cursor's topic, at most ResponsePartitionLimit partitions (capped by
max.request.partition.size.limit, 2000), NextCursor where the answer stopped."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.handlers.metadata import partition_metadata
from gateway.topics.naming import is_internal, is_valid
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)

Response = DescribeTopicPartitionsResponse
Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
MAX_PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit default
# Without ACLs every topic operation is allowed: READ(3), WRITE(4), CREATE(5), DELETE(6),
# ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11) (Kafka's AuthHelper).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def _invalid(req: DescribeTopicPartitionsRequest) -> Response:
    """Kafka throws InvalidRequestException; its getErrorResponse marks every requested topic."""
    return Response(topics=[Topic(error_code=int(ErrorCode.INVALID_REQUEST), name=t.name, partitions=[])
                            for t in req.topics])


async def describe_topic_partitions(ctx: RequestContext, req: DescribeTopicPartitionsRequest) -> Response:
    topics = ctx.services.topics
    fetch_all = not req.topics
    cursor = req.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    if fetch_all:
        names = {t.name for t in await topics.all() if t.name >= start_topic}
    else:
        names = {t.name for t in req.topics if t.name >= start_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _invalid(req)  # the topic list must contain the cursor topic
    if cursor is not None and cursor.partition_index < 0:
        return _invalid(req)  # a negative cursor partition
    remaining = max(min(MAX_PARTITION_LIMIT, req.response_partition_limit), 1)
    out = Response(topics=[])
    for name in sorted(names):
        if remaining == 0:
            # All of the previous topic's partitions fit: continue at this topic's start.
            out.next_cursor = Response.Cursor(topic_name=name, partition_index=0)
            break
        info = await topics.get(name) if is_valid(name) else None
        if info is None:
            if not fetch_all:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if is_valid(name) else ErrorCode.INVALID_TOPIC_EXCEPTION
                out.topics.append(Topic(error_code=int(code), name=name, is_internal=is_internal(name), partitions=[],
                                        topic_authorized_operations=TOPIC_OPERATIONS))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        upper = min(info.partitions, first + remaining)
        parts = []
        for p in range(first, upper):
            m = partition_metadata(ctx, info, p)
            parts.append(Partition(error_code=m.error_code, partition_index=p, leader_id=m.leader_id,
                                   leader_epoch=m.leader_epoch, replica_nodes=m.replica_nodes,
                                   isr_nodes=m.isr_nodes, eligible_leader_replicas=[], last_known_elr=[],
                                   offline_replicas=[]))
        out.topics.append(Topic(name=name, topic_id=info.topic_id, is_internal=is_internal(name),
                                partitions=parts, topic_authorized_operations=TOPIC_OPERATIONS))
        if upper < info.partitions:
            out.next_cursor = Response.Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(parts)
    return out
