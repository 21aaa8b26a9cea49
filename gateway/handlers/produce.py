"""Produce (v3-13): batches validated and patched in place in the request buffer, appended as
one log entry each; acks=0 sends nothing, acks=1 and acks=-1 both answer once the ack quorum
has the batch (Kafka over BookKeeper, as KoP)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

from gateway.context import RequestContext
from gateway.dispatch import CloseConnection
from gateway.errors import KafkaApiError, RecordValidationError
from gateway.metrics import bytes_in, produce_answered
from gateway.partition.log import AppendResult
from gateway.partition.lookup import TopicCache
from kafka_wire.errors import ErrorCode
from kafka_wire.exceptions import DecodeError
from kafka_wire.hotpath import decode_produce_request
from kafka_wire.messages.produce import ProduceResponse
from kafka_wire.records.batch import ATTR_TRANSACTIONAL, OFF_ATTRIBUTES

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse


class _Sequencer:
    """Requests of one connection assign offsets in arrival order (Kafka handles a
    connection's requests one at a time), even if resolving a topic awaits."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


_sequencer = _Sequencer()


def _swallow(f: asyncio.Future[Any]) -> None:
    if not f.cancelled():
        f.exception()


def _is_transactional(records: memoryview | None) -> bool:
    return records is not None and len(records) > OFF_ATTRIBUTES + 1 and bool(
        int.from_bytes(records[OFF_ATTRIBUTES : OFF_ATTRIBUTES + 2], "big") & ATTR_TRANSACTIONAL
    )


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
    topics = TopicCache(ctx.services)
    # (topic key, partition index) -> settled response or pending append
    slots: list[tuple[str | uuid.UUID, int, PartitionResponse | asyncio.Future[AppendResult]]] = []
    async with _sequencer.hold(ctx.client_address):
        for topic, index, records in req.partitions:
            if req.acks not in (0, 1, -1):
                slots.append((topic, index, _error(index, ErrorCode.INVALID_REQUIRED_ACKS)))
                continue
            try:
                if _is_transactional(records):
                    raise KafkaApiError(int(ErrorCode.INVALID_TXN_STATE), "transactions are not supported yet")
                info, plog = await topics.log(topic, index)
                plog.update_topic(info)
                fut = plog.append(
                    records,
                    api_version=version,
                    max_message_bytes=info.config_int("max.message.bytes"),
                    log_append_time=info.config("message.timestamp.type") == "LogAppendTime",
                    timestamp_before_max_ms=info.config_int("message.timestamp.before.max.ms"),
                    timestamp_after_max_ms=info.config_int("message.timestamp.after.max.ms"),
                )
                bytes_in(info.name, records)
            except RecordValidationError as e:
                slots.append((topic, index, _record_errors(index, e)))
                continue
            except KafkaApiError as e:
                code = e.error_code
                if code == ErrorCode.UNKNOWN_TOPIC_ID and version < 13:
                    code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                slots.append((topic, index, _error(index, code, e.message)))
                continue
            slots.append((topic, index, fut))
    pending = [s[2] for s in slots if isinstance(s[2], asyncio.Future)]
    if req.acks == 0:
        for f in pending:
            f.add_done_callback(_swallow)
        return None
    if pending:
        await asyncio.wait(pending, timeout=max(req.timeout_ms, 0) / 1000 or None)
    by_topic: dict[str | uuid.UUID, list[PartitionResponse]] = defaultdict(list)
    for topic, index, s in slots:
        if isinstance(s, PartitionResponse):
            by_topic[topic].append(s)
            continue
        if not s.done():
            s.add_done_callback(_swallow)
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
    responses = []
    for topic, parts in by_topic.items():
        if isinstance(topic, uuid.UUID):
            responses.append(TopicResponse(topic_id=topic, partition_responses=parts))
        else:
            responses.append(TopicResponse(name=topic, partition_responses=parts))
    return ProduceResponse(responses=responses)
