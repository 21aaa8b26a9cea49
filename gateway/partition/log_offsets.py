"""The offsets of an owned partition: start, high watermark, ListOffsets and leader-epoch
lookups, offset -> position (a base of PartitionLog)."""

from __future__ import annotations

from collections.abc import Callable

from gateway.partition.epochs import EpochHistory
from gateway.partition.producers import ProducerStates
from kafka_log.index import NO_TIMESTAMP
from kafka_log.view import KafkaLogView
from kafka_wire.records import TimestampType
from store.managed.log import ManagedLog
from store.managed.position import Position


class PartitionOffsets:
    """Base of PartitionLog (which owns the state declared here)."""

    ml: ManagedLog
    view: KafkaLogView
    epochs: EpochHistory
    producers: ProducerStates
    _hw: int
    _log_start: int
    _check_serving: Callable[[], None]

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest transaction not yet closed by a durable marker, else
        the HW (read_committed readers stop here)."""
        first = self.producers.first_unstable_offset()
        return self._hw if first is None or first > self._hw else first

    @property
    def log_end_offset(self) -> int:
        return self._hw

    @property
    def log_start_offset(self) -> int:
        self.view.index.drop_before(self.ml.start.ledger_id)
        self.view.aborted.drop_before(self.ml.start.ledger_id)
        first = self.view.index.ledgers[0].first_offset if self.view.index.ledgers else self._hw
        return min(max(self._log_start, first), self._hw)

    async def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after `ts`, as Kafka's
        fetchOffsetByTimestamp; None when every record is older."""
        self._check_serving()
        self.log_start_offset  # noqa: B018 - drops deleted ledgers from the index
        start = self._log_start
        found = self.view.index.find_timestamp(ts)
        if found is None:
            return None
        b = await self.view.find_batch(Position(*found), lambda b: b.max_timestamp >= ts and b.last_offset >= start)
        if b is None:
            return None
        if b.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return b.max_timestamp, max(b.base_offset, start)
        base, first_ts = b.base_offset, b.base_timestamp
        for r in b.records():
            off, rts = base + r.offset_delta, first_ts + r.timestamp_delta
            if rts >= ts and off >= start:
                return rts, off
        return None

    async def max_timestamp(self) -> tuple[int, int]:
        """(max timestamp, offset of the first record holding it), (-1, -1) when empty."""
        self._check_serving()
        self.log_start_offset  # noqa: B018
        ts, base = self.view.index.max_timestamp()
        if ts == NO_TIMESTAMP or base < 0:
            return -1, -1
        found = self.view.index.find(base)
        if found is None:
            return -1, -1
        b = await self.view.find_batch(Position(found[0], found[1]), lambda b: b.base_offset == base)
        if b is None or b.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return ts, base
        for r in b.records():
            if b.base_timestamp + r.timestamp_delta == ts:
                return ts, base + r.offset_delta
        return ts, base

    @property
    def remote_storage(self) -> bool:
        """remote.storage.enable: closed ledgers go to the offload tier."""
        return self.ml.config.offload

    def earliest_local_offset(self) -> int:
        """The first offset still on bookies (Kafka's local log start offset): that of the first
        ledger whose bookie copy is not deleted (offloaded ledgers keep theirs for a while)."""
        start = self.log_start_offset
        for li in self.ml.ledgers:
            if li.offload is not None and li.offload.bookie_deleted:
                continue
            idx = self.view.index.get(li.ledger_id)
            if idx is not None and idx.next_offset > idx.first_offset:
                return max(start, idx.first_offset)
        return max(start, self._hw)  # nothing on bookies: Kafka's local log start is then the end

    def latest_tiered_offset(self) -> int:
        """The last offset held by the offload tier (Kafka's highest offset in remote storage),
        -1 if none."""
        for li in reversed(self.ml.ledgers):
            if li.offload is not None:
                idx = self.view.index.get(li.ledger_id)
                if idx is not None:
                    return idx.next_offset - 1
        return -1

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch that wrote `offset` (-1 if unknown)."""
        out = -1
        for e, o in self.epochs.entries:
            if o <= offset:
                out = e
        return out

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self._hw)

    async def position_of(self, offset: int) -> Position:
        """The position of the entry holding `offset` (< HW); the end of the log if none."""
        pos = await self.view.position_of(offset)
        return pos if pos is not None else self.ml.next_position(self.ml.last_confirmed)
