"""OffsetDelete (v0)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import errors_by_topic, group_coordinator, partition_exists
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse

RTopic = OffsetDeleteResponse.OffsetDeleteResponseTopic
RPartition = OffsetDeleteResponse.OffsetDeleteResponsePartition


async def offset_delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    errors: dict[tuple[str, int], int] = {}
    wanted: list[tuple[str, int]] = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if await partition_exists(ctx, t.name, p.partition_index):
                wanted.append(tp)
            else:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        coord = await group_coordinator(ctx, req.group_id)
        top, per = await coord.delete_offsets(req.group_id, wanted)
    except KafkaApiError as e:
        top, per = e.error_code, {}
    if top:
        return OffsetDeleteResponse(error_code=top)
    errors.update(per)
    return OffsetDeleteResponse(
        topics=errors_by_topic(
            req.topics, errors,
            lambda name, parts: RTopic(name=name, partitions=parts),
            lambda index, code: RPartition(partition_index=index, error_code=code),
        )
    )
