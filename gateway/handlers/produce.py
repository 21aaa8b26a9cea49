"""Produce (v3-13): batches validated and patched in place in the request buffer, appended as
one log entry each; acks=1 and acks=-1 both answer once the ack quorum has the batch (Kafka over
BookKeeper, as KoP); acks=0 sends nothing, once the ack quorum has the batch (the connection's
next Fetch sees it, as in Kafka). A request marked as Quire's internal import
(gateway/imports.py) appends its batches at their own offsets instead.

Transactional batches: with transaction.partition.verification.enable (Kafka's default), the
first batch of a producer's transaction on a partition is appended only after the transaction
coordinator confirmed the partition is in the transaction (services.txn_verifier; Produce v12+
under transaction version 2 asks it to add the partition), as Kafka's ReplicaManager does.

Internal topics (`__consumer_offsets`, `__transaction_state`, `__share_group_state`) refuse
appends with INVALID_TOPIC_EXCEPTION unless the client id is Kafka's admin client id, as
Kafka's ReplicaManager.appendToLocalLog (internalTopicsAllowed)."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING

from gateway.context import RequestContext
from gateway.dispatch import CloseConnection
from gateway.errors import KafkaApiError, RecordValidationError
from gateway.imports import IMPORT_DISABLED, import_expected_end, is_import
from gateway.metrics import bytes_in, produce_answered
from gateway.partition.log import AppendResult, PartitionLog
from gateway.partition.lookup import TopicCache, leader_hint
from gateway.topics.naming import is_internal
from kafka_wire.errors import ErrorCode
from kafka_wire.exceptions import DecodeError
from kafka_wire.hotpath import decode_produce_request
from kafka_wire.messages.produce import ProduceResponse
from kafka_wire.records.batch import ATTR_TRANSACTIONAL, OFF_ATTRIBUTES, OFF_PRODUCER_ID
from store.tasks import retrieve_outcome

if TYPE_CHECKING:
    from gateway.topics.registry import TopicInfo

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
# Kafka's AdminUtils.ADMIN_CLIENT_ID: the one client id allowed to append to internal topics.
ADMIN_CLIENT_ID = "__admin_client"


def _is_transactional(records: memoryview | None) -> bool:
    return records is not None and len(records) > OFF_ATTRIBUTES + 1 and bool(
        int.from_bytes(records[OFF_ATTRIBUTES : OFF_ATTRIBUTES + 2], "big") & ATTR_TRANSACTIONAL
    )


# Verification errors an older client would not retry, turned into one it retries without a
# metadata refresh (Kafka's ReplicaManager does the same; CONCURRENT_TRANSACTIONS only below v12).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
})
TV2_PRODUCE_VERSION = 12  # Produce v12+ (ADD_PARTITION): the partition is added implicitly (TV2)
GENERIC_ERROR_PRODUCE_VERSION = 11  # Produce v11+ knows TRANSACTION_ABORTABLE


def verification_error(code: ErrorCode, api_version: int) -> KafkaApiError:
    """The produce error for a coordinator's answer to AddPartitionsToTxn (verify or add), as
    Kafka 4.4's AddPartitionsToTxnManager and ReplicaManager map it."""
    if code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    elif code == ErrorCode.TRANSACTION_ABORTABLE and api_version < GENERIC_ERROR_PRODUCE_VERSION:
        code = ErrorCode.INVALID_TXN_STATE
    if code == ErrorCode.INVALID_TXN_STATE:
        return KafkaApiError(int(code), "Partition was not added to the transaction")
    if code in _RETRY_AS_NOT_ENOUGH_REPLICAS or (
        code == ErrorCode.CONCURRENT_TRANSACTIONS and api_version < TV2_PRODUCE_VERSION
    ):
        return KafkaApiError(
            int(ErrorCode.NOT_ENOUGH_REPLICAS),
            f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}",
        )
    return KafkaApiError(int(code), f"transaction verification failed: {code.name}")


VERIFY_ATTEMPTS = 3  # asking again at once after CONCURRENT_TRANSACTIONS (see below)
TopicPartition = tuple[str, int]


def _producer(records: memoryview) -> tuple[int, int]:
    """(producer id, epoch) of a batch (-1 when it is too short to carry them: validation refuses it)."""
    if len(records) < OFF_PRODUCER_ID + 10:
        return -1, -1
    return (int.from_bytes(records[OFF_PRODUCER_ID : OFF_PRODUCER_ID + 8], "big", signed=True),
            int.from_bytes(records[OFF_PRODUCER_ID + 8 : OFF_PRODUCER_ID + 10], "big", signed=True))


async def _verify_producer(
    ctx: RequestContext, transactional_id: str, pid: int, epoch: int, plogs: dict[TopicPartition, PartitionLog]
) -> dict[TopicPartition, int | KafkaApiError]:
    """One coordinator question for all the partitions of a request where this producer's batch
    would open its transaction (one AddPartitionsToTxn, so one coordinator write under TV2, not
    one per partition): per partition the verification guard for the append, or the error."""
    out: dict[TopicPartition, int | KafkaApiError] = {}
    todo = dict(plogs)
    for _ in range(VERIFY_ATTEMPTS):
        guards = {tp: plog.producers.verification_guard(pid) for tp, plog in todo.items()}
        codes = await ctx.services.txn_verifier(transactional_id, pid, epoch, set(todo),
                                                ctx.api_version >= TV2_PRODUCE_VERSION)
        for tp in list(todo):
            code = ErrorCode(codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))
            # CONCURRENT_TRANSACTIONS: the coordinator answers it once the previous transaction's
            # markers are in (which changed the guard): ask again, as Kafka's AddPartitionsToTxnManager
            if code == ErrorCode.CONCURRENT_TRANSACTIONS:
                out[tp] = verification_error(code, ctx.api_version)
                continue
            out[tp] = guards[tp] if code == ErrorCode.NONE else verification_error(code, ctx.api_version)
            del todo[tp]
        if not todo:
            break
    return out


async def _verify_transactional(
    ctx: RequestContext, transactional_id: str | None, batches: dict[TopicPartition, tuple[PartitionLog, memoryview]]
) -> dict[TopicPartition, int | KafkaApiError]:
    """Which transactional batches of a request may be appended: a batch that would open a
    transaction on its partition needs the coordinator's confirmation first. Per partition that
    needed it, the producer's verification guard for the append or the KafkaApiError to answer
    (partitions absent: nothing to verify). The partitions are verified together."""
    if not ctx.services.config.transaction_partition_verification:
        return {}
    out: dict[TopicPartition, int | KafkaApiError] = {}
    by_producer: dict[tuple[int, int], dict[TopicPartition, PartitionLog]] = defaultdict(dict)
    for tp, (plog, records) in batches.items():
        pid, epoch = _producer(records)
        if pid < 0 or plog.producers.in_transaction(pid, epoch):
            continue
        if transactional_id is None:
            out[tp] = KafkaApiError(int(ErrorCode.INVALID_TXN_STATE), "a transactional batch without a transactional id")
            continue
        by_producer[(pid, epoch)][tp] = plog
    if by_producer and transactional_id is not None:
        tid = transactional_id
        for r in await asyncio.gather(*(_verify_producer(ctx, tid, pid, epoch, plogs)
                                        for (pid, epoch), plogs in by_producer.items())):
            out.update(r)
    return out


def _topic_error(code: int, version: int) -> int:
    return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if code == ErrorCode.UNKNOWN_TOPIC_ID and version < 13 else code


def _error(index: int, code: int, message: str = "") -> PartitionResponse:
    return PartitionResponse(index=index, error_code=int(code), base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, error_message=message or None)


def _record_errors(index: int, e: RecordValidationError) -> PartitionResponse:
    """A batch refused for some of its records: Kafka's RecordErrors (v8+) beside the error."""
    out = _error(index, e.error_code, e.message)
    out.record_errors = [ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                         for i, m in e.record_errors]
    return out


async def handle_produce(ctx: RequestContext, body: memoryview) -> ProduceResponse | None:
    version = ctx.api_version
    try:
        req = decode_produce_request(body, version)
    except DecodeError as e:
        raise CloseConnection(f"bad Produce request: {e}") from None
    importing = is_import(ctx.header_tags)
    expected_end = import_expected_end(ctx.header_tags) if importing else None
    topics = TopicCache(ctx.services.topics, ctx.services.partitions)
    # (topic key, partition index) -> settled response or pending append
    slots: list[tuple[str | uuid.UUID, int, PartitionResponse | asyncio.Future[AppendResult]]] = []
    # (topic key, partition index, records, topic, log) of the batches to append, in request order
    todo: list[tuple[str | uuid.UUID, int, memoryview | None, TopicInfo, PartitionLog]] = []
    for topic, index, records in req.partitions:
        if req.acks not in (0, 1, -1):
            slots.append((topic, index, _error(index, ErrorCode.INVALID_REQUIRED_ACKS)))
            continue
        if importing and not ctx.services.config.import_enable:
            slots.append((topic, index, _error(index, ErrorCode.INVALID_REQUEST, IMPORT_DISABLED)))
            continue
        try:
            info = await topics.get(topic)
            if is_internal(info.name) and ctx.client_id != ADMIN_CLIENT_ID and 0 <= index < info.partitions:
                # checked before ownership, as Kafka (no message: hasCustomErrorMessage false)
                slots.append((topic, index, _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION)))
                continue
            info, plog = await topics.log(topic, index)
            plog.update_topic(info)
            if importing:
                slots.append((topic, index, plog.import_batches(records, expected_end=expected_end)))
                continue
        except KafkaApiError as e:
            slots.append((topic, index, _error(index, _topic_error(e.error_code, version), e.message)))
            continue
        todo.append((topic, index, records, info, plog))
    transactional = {(plog.topic.name, plog.partition): (plog, records)
                     for _, _, records, _, plog in todo if records is not None and _is_transactional(records)}
    verified = await _verify_transactional(ctx, req.transactional_id, transactional) if transactional else {}
    accepted: dict[str, int] = {}  # topic -> bytes accepted, counted once per topic
    for topic, index, records, info, plog in todo:
        try:
            guard = verified.get((plog.topic.name, plog.partition))
            if isinstance(guard, KafkaApiError):
                raise guard
            settings = info.produce_settings
            fut = plog.append(
                records,
                api_version=version,
                max_message_bytes=settings.max_message_bytes,
                log_append_time=settings.log_append_time,
                timestamp_before_max_ms=settings.timestamp_before_max_ms,
                timestamp_after_max_ms=settings.timestamp_after_max_ms,
                verification_guard=guard,
                compacted=settings.compacted,
            )
            if records is not None:
                accepted[info.name] = accepted.get(info.name, 0) + records.nbytes
        except RecordValidationError as e:
            slots.append((topic, index, _record_errors(index, e)))
            continue
        except KafkaApiError as e:
            slots.append((topic, index, _error(index, _topic_error(e.error_code, version), e.message)))
            continue
        slots.append((topic, index, fut))
    bytes_in(accepted)
    # Sequenced: the connection's next request may start; only a next Produce overlaps our wait.
    ctx.effects_applied(durability_pending=True)
    pending = [s[2] for s in slots if isinstance(s[2], asyncio.Future)]
    if pending:
        await asyncio.wait(pending, timeout=max(req.timeout_ms, 0) / 1000 or None)
    if req.acks == 0:
        # Answered with nothing, but only once durable (bounded by the timeout, as any Produce):
        # until then the connection's next request other than a Produce waits, so a Fetch sees
        # these batches, as in Kafka, where a connection's requests apply one at a time.
        for f in pending:
            f.add_done_callback(retrieve_outcome)
        return None
    by_topic: dict[str | uuid.UUID, list[PartitionResponse]] = defaultdict(list)
    for topic, index, s in slots:
        if isinstance(s, PartitionResponse):
            by_topic[topic].append(s)
            continue
        if not s.done():
            s.add_done_callback(retrieve_outcome)
            by_topic[topic].append(_error(index, ErrorCode.REQUEST_TIMED_OUT))
            continue
        exc = s.exception()
        if exc is not None:
            code = exc.error_code if isinstance(exc, KafkaApiError) else int(ErrorCode.KAFKA_STORAGE_ERROR)
            by_topic[topic].append(_error(index, code, str(exc)))
            continue
        r = s.result()
        by_topic[topic].append(PartitionResponse(index=index, error_code=0, base_offset=r.base_offset,
                                                 log_append_time_ms=r.log_append_time,
                                                 log_start_offset=r.log_start_offset))
    produce_answered(by_topic)
    nodes = await _leader_hints(ctx, topics, by_topic) if version >= 10 else []
    responses = []
    for topic, parts in by_topic.items():
        if isinstance(topic, uuid.UUID):
            responses.append(TopicResponse(topic_id=topic, partition_responses=parts))
        else:
            responses.append(TopicResponse(name=topic, partition_responses=parts))
    return ProduceResponse(responses=responses, node_endpoints=nodes)


async def _leader_hints(ctx: RequestContext, topics: TopicCache,
                        by_topic: dict[str | uuid.UUID, list[PartitionResponse]]) -> list[ProduceResponse.NodeEndpoint]:
    """KIP-951 (v10+): NOT_LEADER_OR_FOLLOWER partitions carry the current leader, and the
    answer that leader's endpoint, as Kafka's handleProduceRequest."""
    nodes: dict[int, ProduceResponse.NodeEndpoint] = {}
    for topic, parts in by_topic.items():
        for p in parts:
            if p.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            try:
                info = await topics.get(topic)
            except KafkaApiError:
                continue
            (leader, epoch), node = leader_hint(ctx.services.cluster, ctx.services.partitions, ctx.services.node_id, info.topic_id, p.index)
            p.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            if node is not None:
                nodes[node.node_id] = ProduceResponse.NodeEndpoint(node_id=node.node_id, host=node.host,
                                                                   port=node.port, rack=node.rack)
    return list(nodes.values())
