"""DescribeQuorum (v0-2). Kafka brokers forward it to the KRaft controller quorum, which
describes the `__cluster_metadata` partition it replicates. Quire has no such quorum (its
metadata lives in the metadata store, as a ZooKeeper-mode Kafka's did, whose clients got
UnsupportedVersionException for this call): a request naming `__cluster_metadata` is answered
with the top-level error UNSUPPORTED_VERSION, which the Java admin raises at once (a partition
error would be retried until the call times out), not with an invented quorum. Any other
partition is answered as a Kafka quorum answers one it does not host."""

from __future__ import annotations

from gateway.context import RequestContext
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse

METADATA_TOPIC = "__cluster_metadata"
NOT_HOSTED = "This server does not host this topic-partition."
NO_QUORUM = "Quire has no KRaft controller quorum: its cluster metadata lives in the metadata store."


async def describe_quorum(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if any(t.topic_name == METADATA_TOPIC for t in req.topics):
        return DescribeQuorumResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION), error_message=NO_QUORUM,
                                      topics=[])
    return DescribeQuorumResponse(topics=[
        DescribeQuorumResponse.TopicData(topic_name=t.topic_name, partitions=[
            DescribeQuorumResponse.PartitionData(partition_index=p.partition_index,
                                                 error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                                 error_message=NOT_HOSTED)
            for p in t.partitions])
        for t in req.topics])
