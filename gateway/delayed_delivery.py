"""Delayed delivery for share groups (Pulsar's deliverAt / delayed delivery): when a share group
may first acquire a record. Two topic configs turn it on:

- `quire.delivery.delay.ms` > 0: not before the record's timestamp plus that delay;
- `quire.delayed.delivery.enable=true`: not before the epoch-ms time in the record's
  `quire.deliver.at` header (the later of the two when both apply).

Topics with neither pay nothing: no record is decoded. With only the delay, the batch header's
max timestamp bounds every record of the batch (no decoding; a record may wait up to its
batch's time spread longer). With the header, the batch's records are decoded, and only for
batches holding records never delivered nor held back yet (SharePartition asks per batch), so
each record is decoded about once per group, not on every fetch; what is held back is kept in
the share-partition (spans with their time, one timer per time), never found by re-reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.share.partition import DueTimes
from kafka_wire.records.batch import TimestampType, data_batches

DELAY_CONFIG = "quire.delivery.delay.ms"
ENABLE_CONFIG = "quire.delayed.delivery.enable"
DELIVER_AT_HEADER = "quire.deliver.at"


def due_times(delay_ms: int, headers: bool, batches: Sequence[tuple[int, int, bytes | memoryview]]) -> DueTimes | None:
    """The share-partition's `due` for these read batches ((base, last, bytes)), or None when
    delayed delivery is not in use on the topic."""
    if delay_ms <= 0 and not headers:
        return None
    batch_at = data_batches(batches)

    def due(base: int) -> list[tuple[int, int, int]]:
        b = batch_at(base)
        if b is None:
            return []
        append_time = b.timestamp_type == TimestampType.LOG_APPEND_TIME
        if not headers:
            return [(b.base_offset, b.last_offset, b.max_timestamp + delay_ms)]
        out: list[tuple[int, int, int]] = []
        for r in b.records():
            at = (b.max_timestamp if append_time else b.base_timestamp + r.timestamp_delta) + delay_ms
            if delay_ms <= 0:
                at = 0
            for k, v in r.headers:
                if k == DELIVER_AT_HEADER and v:
                    try:
                        at = max(at, int(v))
                    except ValueError:
                        pass  # not a number: delivered as if absent
            o = b.base_offset + r.offset_delta
            if out and out[-1][1] + 1 == o and out[-1][2] == at:
                out[-1] = (out[-1][0], o, at)
            else:
                out.append((o, o, at))
        return [run for run in out if run[2] > 0]

    return due
