"""Produce checks that Kafka's LogValidator makes per record and answers with RecordErrors
(batch index and message per invalid record). Off the hot path: the batch header decides
whether records need reading at all, so a batch on a topic with default settings is never
decoded here; the key check of compacted topics walks key lengths, decoding no record.

message.timestamp.before.max.ms / after.max.ms (CreateTime topics): a record whose timestamp is
out of [now - before, now + after] fails with INVALID_TIMESTAMP. The header's max timestamp
bounds every record from above, so the after-limit needs records only when the header breaks
it; nothing in the header bounds records from below, so a before-limit other than the default
(Long.MAX_VALUE: no record can break it) is checked on each record, as Kafka does."""

from __future__ import annotations

from gateway.errors import KafkaApiError, RecordValidationError
from gateway.metrics import NO_KEY_COMPACTED
from kafka_wire.errors import ErrorCode
from kafka_wire.records import InvalidBatch
from kafka_wire.records.batch import RecordBatch

LONG_MAX = (1 << 63) - 1
NO_TIMESTAMP = -1
INVALID_TIMESTAMPS = "One or more records have been rejected due to invalid timestamp"


def _long(v: int) -> int:
    """Java long arithmetic, for the bounds Kafka prints (now + after.max.ms may wrap)."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def check_timestamps(batch: RecordBatch, now: int, before_max: int | None, after_max: int | None) -> None:
    """Raise RecordValidationError(INVALID_TIMESTAMP) naming every record out of range (None:
    no limit); KafkaApiError for records that do not parse."""
    before_max = LONG_MAX if before_max is None else before_max
    after_max = LONG_MAX if after_max is None else after_max
    if batch.max_timestamp - now <= after_max and before_max >= LONG_MAX:
        return
    errors: list[tuple[int, str | None]] = []
    base_ts, base_offset = batch.base_timestamp, batch.base_offset
    low, high = _long(now - before_max), _long(now + after_max)
    try:
        for index, r in enumerate(batch.records()):
            ts = base_ts + r.timestamp_delta
            if ts != NO_TIMESTAMP and (now - ts > before_max or ts - now > after_max):
                errors.append((index, f"Timestamp {ts} of message with offset {base_offset + r.offset_delta} is "
                                      f"out of range. The timestamp should be within [{low}, {high}]"))
    except InvalidBatch as e:
        raise KafkaApiError(int(e.error_code), str(e)) from None
    if errors:
        raise RecordValidationError(int(ErrorCode.INVALID_TIMESTAMP), INVALID_TIMESTAMPS, errors)


def _record_errors_message(errors: list[tuple[int, str | None]]) -> str:
    """Kafka's LogValidator.processRecordErrors text (RecordError.toString of the first three)."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message={'null' if m is None else repr(m)})"
                      for i, m in errors[:3])
    return (f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]")


def check_keys(batch: RecordBatch, topic_partition: str) -> None:
    """A compacted topic refuses records without a key (control batches carry keys of their
    own): INVALID_RECORD naming each, as Kafka's LogValidator.validateKey. Every batch to a
    compacted topic comes here, so records are not decoded: their key lengths are walked."""
    if batch.is_control:
        return
    try:
        keyless = batch.keyless_records()
    except InvalidBatch as e:
        raise KafkaApiError(int(e.error_code), str(e)) from None
    if keyless:
        msg = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
        errors: list[tuple[int, str | None]] = [(i, msg) for i in keyless]
        NO_KEY_COMPACTED.inc(len(errors))
        raise RecordValidationError(int(ErrorCode.INVALID_RECORD), _record_errors_message(errors), errors)
