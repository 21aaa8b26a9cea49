"""AddPartitionsToTxn (v0-5): v0-3 a client adding partitions to its transaction; v4+ batched,
with the verify-only form a partition owner uses (KIP-890) and the implicit add of
transaction version 2."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.init_producer_id import fenced_code
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


def _results(errors: dict[tuple[str, int], int]) -> list[TopicResult]:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (t, p), code in errors.items():
        by_topic.setdefault(t, []).append(PartitionResult(partition_index=p, partition_error_code=code))
    return [TopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


async def _one(ctx: RequestContext, txn: Txn, *, from_broker: bool) -> dict[tuple[str, int], int]:
    wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
    unknown = {}
    for name, p in wanted:
        info = await ctx.services.topics.get(name)
        if info is None or not 0 <= p < info.partitions:
            unknown[(name, p)] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if unknown:
        # as Kafka: nothing is added when one partition is unknown
        return {tp: unknown.get(tp, int(ErrorCode.OPERATION_NOT_ATTEMPTED)) for tp in wanted}
    tid = txn.transactional_id
    try:
        coord = await ctx.services.txn_coordinators().coordinator_for(tid)
    except KafkaApiError as e:
        return dict.fromkeys(wanted, e.error_code)
    if txn.verify_only:
        return coord.verify_partitions(tid, txn.producer_id, txn.producer_epoch, set(wanted))
    err = await coord.add_partitions(tid, txn.producer_id, txn.producer_epoch, set(wanted),
                                     client_version=2 if from_broker else 1, retry_after_completion=from_broker)
    return dict.fromkeys(wanted, err)


async def add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    v = ctx.api_version
    if v <= 3:
        txn = Txn(transactional_id=req.v3_and_below_transactional_id, producer_id=req.v3_and_below_producer_id,
                  producer_epoch=req.v3_and_below_producer_epoch, topics=list(req.v3_and_below_topics))
        errors = await _one(ctx, txn, from_broker=False)
        errors = {tp: fenced_code(code, v, 2) for tp, code in errors.items()}
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(errors))
    results = []
    for txn in req.transactions:
        errors = await _one(ctx, txn, from_broker=True)
        results.append(AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id, topic_results=_results(errors)))
    return AddPartitionsToTxnResponse(results_by_transaction=results)
