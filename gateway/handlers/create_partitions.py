"""CreatePartitions (v0-3): increase only."""

from __future__ import annotations

from collections import Counter

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in req.topics)
    out: list[Result] = []
    for t in req.topics:
        try:
            if counts[t.name] > 1:
                raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), "Duplicate topic name.")
            if t.assignments is not None:
                raise KafkaApiError(int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), "Manual replica assignments are not "
                                    "supported: Quire places each partition on a gateway by ownership leases.")
            if await ctx.services.topics.get(t.name) is None:
                raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Topic '{t.name}' does not exist.")
            await ctx.services.topics.add_partitions(t.name, t.count, validate_only=req.validate_only)
            out.append(Result(name=t.name, error_message=None))
        except KafkaApiError as e:
            out.append(Result(name=t.name, error_code=e.error_code, error_message=e.message))
    return CreatePartitionsResponse(results=out)
