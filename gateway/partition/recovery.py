"""Rebuilding a partition's in-memory state when its log is opened by a new owner.

Indexes of finished ledgers come from their properties; entries no index covers (normally the
tail ledger the previous owner never finished, recovered by ManagedLog.open) are read once to
index them. Producer state (open transactions included) is the last snapshot plus a replay of
the batches and transaction markers after it. The aborted-transactions index comes from the
finished ledgers' properties, the snapshot's list for the others, and the replayed markers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.partition.producers import BatchMeta, ProducerStates
from kafka_log.index import LedgerIndex, OffsetIndex
from kafka_log.keys import L_NEXT, L_PRODUCERS, L_START
from kafka_log.txn import L_ABORTED, AbortedIndex, AbortedTxn
from kafka_log.view import SegmentedLog, scan
from kafka_wire.records import RecordBatch, read_end_txn_marker
from kafka_wire.records.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from store.managed.log import ManagedLog
from store.managed.metadata import LedgerInfo
from store.managed.position import Position

log = logging.getLogger(__name__)


@dataclass
class Rebuilt:
    index: OffsetIndex
    producers: ProducerStates
    next_offset: int
    rebuilt: list[LedgerIndex] = field(default_factory=list)  # indexes to persist
    aborted: AbortedIndex = field(default_factory=AbortedIndex)
    replay: Replay | None = None  # how to go on replaying entries appended since (replay_more)


@dataclass
class Replay:
    """Where a replay stopped, and what it needs to go on."""

    resume: Position | None  # the next entry to replay (None: nothing was to be replayed)
    unindexed: Position | None  # the first entry no persisted index covers
    snap_upto: int  # the producer snapshot's offset
    floor: int  # the least next offset the log's properties give


async def rebuild(ml: ManagedLog, what: str) -> Rebuilt:
    """The state of an opened log (all ledgers but the new current one are closed)."""
    # Up to the new current ledger (this owner's, empty): every older one is closed.
    return await replay_state(ml, ml.properties, ml.ledgers[:-1], what, end=Position(ml.current_ledger_id, -1))


async def replay_state(
    source: SegmentedLog, props: Mapping[str, str], ledgers: list[LedgerInfo], what: str, *, end: Position | None = None
) -> Rebuilt:
    """The state of a log from its metadata (`props`, `ledgers`) and the entries after what it
    persisted, read from `source` up to `end` (None: as far as it reads, a non-owning reader's
    open tail up to its LAC: how the data source learns a read_committed read's bounds)."""
    producers, snap_upto = ProducerStates.from_snapshot(props.get(L_PRODUCERS))
    index = OffsetIndex()
    aborted = AbortedIndex()
    rebuilt: list[LedgerIndex] = []
    unindexed: Position | None = None  # the first entry no persisted index covers
    for li in ledgers:
        if li.closed and li.entries <= 0:
            continue
        idx = None if unindexed is not None else LedgerIndex.from_props(li.ledger_id, li.props)
        if idx is not None:
            index.append_ledger(idx)
            aborted.load_ledger(li.ledger_id, li.props)
            if idx.count < li.entries:
                rebuilt.append(idx)
                unindexed = Position(li.ledger_id, idx.count)
        elif unindexed is None:
            unindexed = Position(li.ledger_id, 0)
    aborted.load_text(props.get(L_ABORTED))
    start = unindexed
    if index.last is not None and snap_upto < index.last.next_offset:
        found = index.find(max(snap_upto, index.ledgers[0].first_offset))
        if found is not None:
            start = Position(found[0], found[1])
    floor = max(int(props.get(L_NEXT, "0")), int(props.get(L_START, "0")))
    state = Rebuilt(index, producers, floor, rebuilt, aborted, Replay(start, unindexed, snap_upto, floor))
    if start is not None:
        log.info("partition %s: replaying from %s (producer snapshot up to %d)", what, start, snap_upto)
    await replay_more(source, state, end)
    return state


async def replay_more(source: SegmentedLog, state: Rebuilt, end: Position | None = None) -> None:
    """Go on with a replay from where it stopped, up to `end` (None: as far as `source`
    reads): a reader following a log whose metadata did not change replays only new entries."""
    r = state.replay
    if r is None or r.resume is None:
        return
    index, producers, aborted, rebuilt = state.index, state.producers, state.aborted, state.rebuilt
    unindexed, snap_upto = r.unindexed, r.snap_upto
    now = int(time.time() * 1000)
    async for entries in scan(source, r.resume, end=end):
        last = entries[-1].position
        for e in entries:
            h = RecordBatch(e.data).header()
            base, nxt = h[0], h[0] + h[6] + 1
            if unindexed is not None and e.position >= unindexed:
                cur = index.last
                if cur is None or cur.ledger_id != e.position.ledger_id:
                    cur = LedgerIndex(e.position.ledger_id, base)
                    index.append_ledger(cur)
                    rebuilt.append(cur)
                cur.add(e.position.entry_id, base, nxt, h[8])
            if base < snap_upto or h[9] < 0:
                continue
            if h[5] & ATTR_CONTROL:
                marker = read_end_txn_marker(RecordBatch(e.data))
                if marker is None:
                    continue
                done = producers.apply_marker(h[9], h[10], marker.coordinator_epoch, marker.commit, base, now)
                if done is not None:
                    producers.complete(done)
                    if done.aborted:
                        first = producers.first_unstable_offset()
                        lso = nxt if first is None else first
                        aborted.add(e.position.ledger_id, AbortedTxn(h[9], done.first_offset, base, lso))
                continue
            last_seq = (h[11] + h[6]) % (1 << 31)
            # replayed producers count as active now: expiry restarts after an owner change
            producers.update(
                h[9], h[10], BatchMeta(h[11], last_seq, base, nxt - 1, h[8]), now, bool(h[5] & ATTR_TRANSACTIONAL)
            )
        r.resume = Position(last.ledger_id, last.entry_id + 1)
    state.next_offset = max(index.last.next_offset if index.last is not None else 0, r.floor)
