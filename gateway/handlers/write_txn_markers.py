"""WriteTxnMarkers (v1-2): a transaction coordinator asks this gateway to append COMMIT/ABORT
markers to the partitions it owns; each partition answers once its marker is durable
(NOT_LEADER_OR_FOLLOWER for partitions owned elsewhere, as Kafka's brokers)."""

from __future__ import annotations

import asyncio

from gateway.context import RequestContext
from gateway.partition.lookup import TopicCache
from gateway.partition.markers import write_marker
from kafka_wire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


async def handle_write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    topics = TopicCache(ctx.services.topics, ctx.services.partitions)
    # v1 has no transaction_version field (0): those markers follow TV1's epoch rule
    jobs = [
        write_marker(topics, ctx.services.groups, t.name, p, m.producer_id, m.producer_epoch, m.transaction_result,
                     m.coordinator_epoch, max(m.transaction_version, 1))
        for m in req.markers for t in m.topics for p in t.partition_indexes
    ]
    codes = iter(await asyncio.gather(*jobs))
    return WriteTxnMarkersResponse(markers=[
        MarkerResult(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[
                PartitionResult(partition_index=p, error_code=int(next(codes))) for p in t.partition_indexes
            ])
            for t in m.topics
        ])
        for m in req.markers
    ])
