"""InitProducerId (v0-6): a fresh producer id for an idempotent producer; for a transactional
id, its transaction coordinator's epoch bump, fencing and KIP-360 recovery."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


def fenced_code(error: int, version: int, fenced_since: int) -> int:
    """Versions before KIP-588's bump know no PRODUCER_FENCED: Kafka answers INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return error


async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    v = ctx.api_version
    tid = req.transactional_id
    if tid is None:
        # as Kafka without a transactional id: always a fresh producer id at epoch 0
        pid = await ctx.services.producer_ids.next()
        return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)
    if v >= 6 and req.enable2_pc:
        # two-phase commit (KIP-939) is off, as in Kafka 4.4 by default
        return InitProducerIdResponse(error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                      producer_id=-1, producer_epoch=-1)
    pid, epoch = (req.producer_id, req.producer_epoch) if v >= 3 else (-1, -1)
    try:
        if not tid:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "empty transactional id")
        coord = await ctx.services.txn_coordinators().coordinator_for(tid)
        r = await coord.init_producer_id(tid, req.transaction_timeout_ms, pid, epoch)
        error, pid, epoch = r.error, r.producer_id, r.producer_epoch
    except KafkaApiError as e:
        error, pid, epoch = e.error_code, -1, -1
    return InitProducerIdResponse(error_code=fenced_code(error, v, 4), producer_id=pid, producer_epoch=epoch)
