"""TxnOffsetCommit (v0-6; v6 names topics by id, KIP-1319): offsets committed in a
transaction, held per producer by the group's shard until the transaction's marker lands.
As Kafka 4.4 (transaction.partition.verification.enable), the group's offsets partition must
be in the producer's transaction (AddOffsetsToTxn first) before v5; v5 (transaction version 2)
adds it."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.handlers.group_lookup import errors_by_topic, group_coordinator, offsets_to_commit, topic_names
from gateway.handlers.init_producer_id import fenced_code
from gateway.txns import check_partitions_in_txn
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse

RTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
RPartition = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition


async def txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    v = ctx.api_version
    names = await topic_names(ctx, req.topics) if v >= 6 else {}
    wanted, errors = await offsets_to_commit(
        ctx, [(names.get(t.topic_id) if v >= 6 else t.name, t.partitions) for t in req.topics], leader_epochs=v >= 2
    )
    if wanted:
        try:
            coord = await group_coordinator(ctx, req.group_id)
            groups = ctx.services.group_coordinators()
            topic = await groups.offsets_topic()
            offsets_tp = (topic.name, groups.shard_of(req.group_id, topic))
            # v5 is transaction version 2's: the offsets partition is added here, not by AddOffsetsToTxn
            verified = await check_partitions_in_txn(
                ctx.services.txn_coordinators(), ctx.services.node_id, req.transactional_id, req.producer_id, req.producer_epoch, {offsets_tp}, add=v >= 5
            )
            err = verified[offsets_tp]
            if err == ErrorCode.PRODUCER_FENCED:
                err = ErrorCode.INVALID_PRODUCER_EPOCH  # as Kafka answers a stale epoch here
            elif err == ErrorCode.TRANSACTION_ABORTABLE and v < 5:
                err = ErrorCode.INVALID_TXN_STATE  # v5 (KIP-1050) is the first to know it
            if err:
                errors.update(dict.fromkeys(wanted, err))
            else:
                errors.update(await coord.txn_commit_offsets(
                    req.group_id, req.producer_id, req.producer_epoch,
                    req.generation_id_or_member_epoch if v >= 3 else -1,
                    req.member_id if v >= 3 else "", req.group_instance_id if v >= 3 else None, wanted,
                    api_version=v,
                ))
        except KafkaApiError as e:
            errors.update(dict.fromkeys(wanted, e.error_code))
    errors = {tp: fenced_code(code, v, 3) for tp, code in errors.items()}
    if v >= 6:
        # As Kafka 4.4 answers: the topics of unknown ids first, then the others, each in request order.
        unknown = [t for t in req.topics if t.topic_id not in names]
        known = [t for t in req.topics if t.topic_id in names]
        return TxnOffsetCommitResponse(topics=[
            RTopic(topic_id=t.topic_id, partitions=[
                RPartition(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                for p in t.partitions]) for t in unknown
        ] + [
            RTopic(topic_id=t.topic_id, partitions=[
                RPartition(partition_index=p.partition_index, error_code=errors[(names[t.topic_id], p.partition_index)])
                for p in t.partitions]) for t in known
        ])
    return TxnOffsetCommitResponse(
        topics=errors_by_topic(
            req.topics, errors,
            lambda name, parts: RTopic(name=name, partitions=parts),
            lambda index, code: RPartition(partition_index=index, error_code=code),
        )
    )
