"""The fetch path of an owned partition: stored batches from an offset, as Kafka's log read,
and the replay of a whole log (a base of PartitionLog)."""

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
        self._check_serving()
        self._check_fetch_offset(offset)
        out: list[Buffer] = []
        if offset >= self._hw or (max_bytes <= 0 and not min_one):
            return out
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
                last = batch_offsets(d)[1]
                if last < offset:
                    continue
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
        return out

    def replay(self) -> AsyncIterator[bytes]:
        """Every stored batch from the log start to the HW as of the call, as runs of whole
        batches: for logs replayed into memory (a group coordinator's shard)."""
        self._check_serving()
        return self.view.replay(self.log_start_offset, self.ml.last_confirmed)
