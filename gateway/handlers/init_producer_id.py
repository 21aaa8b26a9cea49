"""InitProducerId (v0-5): producer ids for idempotent producers. Transactional ids are refused
with UNSUPPORTED_VERSION until transactions exist: Java's producer treats it as fatal at once
("Unexpected error in InitProducerIdResponse; The version of API is not supported"), where
COORDINATOR_NOT_AVAILABLE would make it retry until max.block.ms expires."""

from __future__ import annotations

from gateway.context import RequestContext
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return InitProducerIdResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION), producer_id=-1, producer_epoch=-1)
    # as Kafka without a transactional id: always a fresh producer id at epoch 0
    pid = await ctx.services.producer_ids.next()
    return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)
