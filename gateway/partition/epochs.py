"""Leader epoch history of a partition: (epoch, start offset) pairs, as Kafka's
LeaderEpochFileCache, kept in the log's properties and served by OffsetForLeaderEpoch."""

from __future__ import annotations

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochHistory:
    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = list(entries or [])

    @property
    def latest(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """A new epoch starts at `start_offset`; earlier epochs that wrote nothing are dropped."""
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's LeaderEpochFileCache.endOffsetFor."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest:
            return epoch, log_end_offset
        higher = next(((e, o) for e, o in self.entries if e > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = None
        for e, o in self.entries:
            if e <= epoch:
                floor = (e, o)
        return (floor[0] if floor is not None else epoch), higher[1]

    def to_text(self) -> str:
        return ";".join(f"{e},{o}" for e, o in self.entries)

    @classmethod
    def from_text(cls, text: str | None) -> EpochHistory:
        out = []
        for part in filter(None, (text or "").split(";")):
            e, o = part.split(",")
            out.append((int(e), int(o)))
        return cls(out)
