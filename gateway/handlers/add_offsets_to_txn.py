"""AddOffsetsToTxn (v0-4): the group's `__consumer_offsets` partition joins the transaction, so
the TxnOffsetCommit that follows gets the transaction's marker."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.init_producer_id import fenced_code
from kafka_wire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse


async def add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    groups = ctx.services.group_coordinators()
    try:
        topic = await groups.offsets_topic()
        tp = (topic.name, groups.shard_of(req.group_id, topic))
        coord = await ctx.services.txn_coordinators().coordinator_for(req.transactional_id)
        err = await coord.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, {tp})
    except KafkaApiError as e:
        err = e.error_code
    return AddOffsetsToTxnResponse(error_code=fenced_code(err, ctx.api_version, 2))
