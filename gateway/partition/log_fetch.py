"""The fetch path of an owned partition: stored batches from an offset, as Kafka's log read
(read_uncommitted up to the high watermark, read_committed up to the last stable offset with
the aborted transactions of the range), and the replay of a whole log (a base of
PartitionLog)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from gateway.errors import KafkaApiError
from gateway.partition.log_offsets import PartitionOffsets
from kafka_log.view import batch_offsets
from kafka_wire.errors import ErrorCode
from store.managed.position import Position

READ_ENTRIES = 1000
Buffer = bytes | memoryview


class PartitionFetch(PartitionOffsets):
    """Base of PartitionLog (which owns the state declared here)."""

    def _check_fetch_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self._hw:
            raise KafkaApiError(
                int(ErrorCode.OFFSET_OUT_OF_RANGE),
                f"offset {offset} is outside [{self.log_start_offset}, {self._hw}]",
            )

    async def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> list[Buffer]:
        """Stored batches from the one holding `offset`, as Kafka's log read: whole batches
        while they fit in max_bytes (with `min_one`, the first even if it alone is larger),
        then the cut-off start of the next one. OFFSET_OUT_OF_RANGE outside [start, HW]."""
        return (await self._read(offset, max_bytes, min_one, self._hw))[0]

    async def read_committed(
        self, offset: int, max_bytes: int, *, min_one: bool = True
    ) -> tuple[list[Buffer], list[tuple[int, int]]]:
        """As `read`, up to the last stable offset, with the (producer id, first offset) of
        the aborted transactions overlapping the batches returned (Kafka's read_committed
        fetch: the client drops their records). Nothing, without error, from the LSO to the HW."""
        out, end = await self._read(offset, max_bytes, min_one, self.last_stable_offset)
        if not out or end <= offset:
            return out, []
        return out, self.view.aborted.collect(offset, end)

    async def _read(self, offset: int, max_bytes: int, min_one: bool, limit: int) -> tuple[list[Buffer], int]:
        """(batches, offset after the last whole one) of a read stopping before `limit`."""
        self._check_serving()
        self._check_fetch_offset(offset)
        out: list[Buffer] = []
        if offset >= limit or (max_bytes <= 0 and not min_one):
            return out, offset
        total = 0
        pos = self.view.seek(offset)
        last_pos: Position | None = None
        next_off = offset
        done = False
        while not done:
            want = max(max_bytes - total, 1)
            entries = await self.ml.read(pos, READ_ENTRIES, want)
            if not entries:
                break
            for e in entries:
                d = e.data
                base, last = batch_offsets(d)
                if last < offset:
                    continue
                if base >= limit:
                    done = True
                    break
                n = len(d)
                if total + n > max_bytes and not (min_one and not out):
                    room = max_bytes - total
                    if room > 0:
                        out.append(memoryview(d)[:room])
                    done = True
                    break
                out.append(d)
                total += n
                last_pos = e.position
                next_off = last + 1
                if total >= max_bytes:
                    done = True
                    break
            pos = self.ml.next_position(entries[-1].position)
        if last_pos is not None and next_off < self._hw:
            self.view.remember(next_off, self.ml.next_position(last_pos))
        return out, next_off

    def replay(self) -> AsyncIterator[bytes]:
        """Every stored batch from the log start to the HW as of the call, as runs of whole
        batches: for logs replayed into memory (a group coordinator's shard)."""
        self._check_serving()
        return self.view.replay(self.log_start_offset, self.ml.last_confirmed)
