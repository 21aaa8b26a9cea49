"""EndTxn (v0-5): commit or abort; v5 is transaction version 2 (KIP-890), whose every end
bumps the producer epoch, returned in the response."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.init_producer_id import fenced_code
from kafka_wire.messages.end_txn import EndTxnRequest, EndTxnResponse


async def end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    v = ctx.api_version
    try:
        coord = await ctx.services.txn_coordinators().coordinator_for(req.transactional_id)
        r = await coord.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
                                tv2=v >= 5)
        err, pid, epoch = r.error, r.producer_id, r.producer_epoch
    except KafkaApiError as e:
        err, pid, epoch = e.error_code, -1, -1
    return EndTxnResponse(error_code=fenced_code(err, v, 2), producer_id=pid, producer_epoch=epoch)
