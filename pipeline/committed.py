"""read_committed reads of the `quire` data source (`kafka.isolation.level`): each partition's
last stable offset and its aborted transactions, learnt from the store alone, as the partition's
owner learns them when it opens the log (gateway/partition/recovery.py): the aborted-transactions
index persisted in ledger properties, the producer snapshot and its list of aborts not persisted
yet, and a replay of the entries after that snapshot (the open ledger, read up to its LAC). No
gateway is asked: the source knows only the metadata store, and the replay gives what a gateway's
ListOffsets would not, the aborts marked in the open ledger. Reads stop at the LSO; each planned
slice carries the aborts overlapping it (kafka_log/txn.py's `collect`) and its task drops their
batches with AbortedFilter, as a read_committed consumer does. A stream keeps each partition's
replay and, while the log's metadata stays the same (until the owner rolls or persists), reads
only the entries appended since the last trigger."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gateway.partition.recovery import Rebuilt, replay_more, replay_state
from kafka_log.txn import AbortedIndex
from pipeline.logs import PartitionState, Quire, Slice
from store.managed.metadata import LogMetadata


@dataclass
class Committed:
    """What a read_committed read of one partition needs."""

    lso: int  # never past the offsets the bookies confirm (the state's `latest`)
    aborted: AbortedIndex
    replayed: Rebuilt | None = None  # the replay, to go on with while `key` holds
    key: Any = None

    def stable(self, st: PartitionState) -> PartitionState:
        """The partition as read_committed sees it: "latest" is the LSO."""
        return dataclasses.replace(st, latest=self.lso, earliest=min(st.earliest, self.lso))

    def mark(self, slices: list[Slice]) -> list[Slice]:
        """The slices with the aborted transactions their tasks must drop."""
        return [dataclasses.replace(sl, aborted=tuple(self.aborted.collect(sl.start, sl.end))) for sl in slices]


def _key(md: LogMetadata) -> Any:
    """What a replay starts from: the log's properties and its ledgers' (not their LACs)."""
    return (sorted(md.props.items()),
            [(li.ledger_id, li.closed, li.entries, sorted(li.props.items())) for li in md.ledgers])


async def committed(q: Quire, st: PartitionState, previous: Committed | None = None) -> Committed:
    """The LSO and aborted transactions of a partition, as of now (its `st.latest` or less),
    going on from `previous` (of the same partition) when the metadata is unchanged."""
    reader = await q.open_log(st.log)
    if reader is None:
        return Committed(st.latest, AbortedIndex())
    try:
        md = reader.metadata
        key = _key(md)
        state = previous.replayed if previous is not None and previous.key == key else None
        if state is not None:
            assert previous is not None
            previous.replayed = None  # never gone on with twice, nor after a failure
            await replay_more(reader, state)
        else:
            state = await replay_state(reader, md.props, md.ledgers, f"{st.topic}-{st.partition} (read_committed)")
    finally:
        await reader.close()
    first = state.producers.first_unstable_offset()
    return Committed(st.latest if first is None else min(first, st.latest), state.aborted, state, key)
