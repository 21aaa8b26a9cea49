"""What Spark's driver and tasks know of Quire: topics and partitions from the metadata store,
each partition's ledgers with their offset ranges (the offset index kept in ledger properties),
the offsets a query starts and ends at, and the stored batches of an offset range read straight
from the bookies through the non-owning reader (nothing fenced, nothing past the LAC), or from
the offload tier for ledgers offloaded there."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass

from gateway import paths
from gateway.topics.registry import TopicInfo, read_topics
from kafka_log.index import P_MAXTS, LedgerIndex, OffsetIndex
from kafka_log.keys import L_START
from kafka_log.view import KafkaLogView, batch_offsets, log_end_offset, scan
from kafka_wire.records import RecordBatch, TimestampType
from pipeline.options import EARLIEST, LATEST, SLICE_BYTES, Bound, OptionError, SourceOptions, TopicPartition
from store.ledger.client import LedgerClient
from store.ledger.placement import available_bookies
from store.managed.errors import NoSuchLogError
from store.managed.metadata import LogMetadata, OffloadInfo
from store.managed.position import Position
from store.managed.readonly import ManagedLogReader
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from store.net import is_local_host
from store.offload import OffloadSettings, make_tier
from store.offload.tier import Tier
from store.retry import Backoff, Retry

LAC_WAIT_S = 30.0  # how long a task waits for bookies to confirm entries its plan counted
LAC_BACKOFF = Backoff(initial=0.02, maximum=1.0)
_beside_a_bookie: dict[str, bool] = {}  # per metadata URL, for this process's life


class DataLossError(RuntimeError):
    """Planned offsets are no longer (or not yet) readable."""


@dataclass(frozen=True)
class LedgerSpan:
    """One ledger of a partition: its offsets as far as its index says (None: not indexed)."""

    ledger_id: int
    first: int | None
    next: int | None
    size: int
    max_ts: int | None


@dataclass
class PartitionState:
    topic: str
    partition: int
    log: str
    earliest: int
    latest: int  # the offset after the last batch the bookies confirm (LAC)
    spans: list[LedgerSpan]


@dataclass(frozen=True)
class Slice:
    """One Spark input partition: offsets [start, end) of one Kafka partition, held by `ledgers`."""

    topic: str
    partition: int
    log: str
    start: int
    end: int
    ledgers: tuple[int, ...]
    # read_committed: (producer id, first offset) of the aborted transactions to drop (None: read_uncommitted)
    aborted: tuple[tuple[int, int], ...] | None = None


def offset_index(md: LogMetadata) -> OffsetIndex:
    """The persisted offset index of a log's finished ledgers (the open one has none)."""
    index = OffsetIndex()
    for li in md.ledgers:
        if li.closed and li.entries <= 0:
            continue
        idx = LedgerIndex.from_props(li.ledger_id, li.props)
        if idx is None:
            break  # later ledgers' offsets are found by reading forward from the last point
        index.append_ledger(idx)
    return index


def _spans(md: LogMetadata) -> list[LedgerSpan]:
    out = []
    for li in md.ledgers:
        if li.closed and li.entries <= 0:
            continue
        idx = LedgerIndex.from_props(li.ledger_id, li.props)
        complete = idx is not None and li.closed and idx.count >= li.entries
        out.append(LedgerSpan(
            li.ledger_id,
            idx.first_offset if idx is not None else None,
            idx.next_offset if idx is not None and complete else None,
            li.size,
            int(li.props[P_MAXTS]) if complete and P_MAXTS in li.props else None,
        ))
    return out


class LazyTier:
    """The offload tier, built on the first read of an offloaded ledger: a query that reads none
    never creates an S3 client (nor waits on its bucket check)."""

    def __init__(self, settings: OffloadSettings) -> None:
        self.settings = settings
        self.driver = settings.driver
        self._tier: asyncio.Future[Tier | None] | None = None

    async def read(self, info: OffloadInfo, first: int, last: int, max_bytes: int) -> list[bytes]:
        if self._tier is None:
            self._tier = asyncio.ensure_future(asyncio.to_thread(make_tier, self.settings))
        tier = await asyncio.shield(self._tier)
        assert tier is not None  # settings of a configured tier (driver fs or s3)
        return await tier.read(info, first, last, max_bytes)

    async def close(self) -> None:
        if self._tier is None:
            return
        try:
            tier = await self._tier
        except Exception:  # it failed to build: the read that needed it raised already
            return
        if tier is not None:
            await tier.close()


class Quire:
    """One connection to a cluster's metadata store, bookies and offload tier (per driver call
    or task)."""

    def __init__(self, meta_url: str, offload: OffloadSettings | None = None) -> None:
        self.meta_url = meta_url
        # read-only: a task (under whatever priority Spark runs) never holds the store's write lock
        self.meta: MetaStore = open_meta(meta_url, readonly=True)
        self.client: LedgerClient | None = None
        self.tier = LazyTier(offload) if offload is not None else None

    async def __aenter__(self) -> Quire:
        await self.meta.start()
        # Scans flag their range reads background: the bookies serve them after the adds.
        self.client = LedgerClient(self.meta, background_reads=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.client is not None:
            await self.client.close()
        if self.tier is not None:
            await self.tier.close()
        await self.meta.close()

    async def beside_a_bookie(self) -> bool:
        """Whether one of the cluster's live bookies runs on this machine (a standalone's, or an
        executor's machine shared with a bookie), asked once per process and cluster."""
        known = _beside_a_bookie.get(self.meta_url)
        if known is None:
            hosts = {b.address.rpartition(":")[0] for b in await available_bookies(self.meta)}
            known = _beside_a_bookie[self.meta_url] = any(map(is_local_host, hosts))
        return known

    async def open_log(self, name: str) -> ManagedLogReader | None:
        assert self.client is not None
        try:
            return await ManagedLogReader.open(self.meta, self.client, name, offloaded=self.tier)
        except NoSuchLogError:
            return None

    async def topic_partitions(self, opts: SourceOptions) -> list[tuple[TopicInfo, int]]:
        """The partitions a query reads (subscribe / subscribePattern / assign), in order."""
        by_name = {t.name: t for t in await read_topics(self.meta)}
        if opts.assign is not None:
            out = []
            for topic, p in opts.assign:
                t = by_name.get(topic)
                if t is None or not 0 <= p < t.partitions:
                    raise OptionError(f"Partition {topic}-{p} given in option 'assign' does not exist")
                out.append((t, p))
            return out
        if opts.subscribe is not None:
            names = [n for n in opts.subscribe if n in by_name]
        else:
            assert opts.pattern is not None
            names = sorted(n for n in by_name if opts.pattern.fullmatch(n) and not n.startswith("__"))
        return [(by_name[n], p) for n in names for p in range(by_name[n].partitions)]

    async def state(self, topic: TopicInfo, partition: int) -> PartitionState:
        name = paths.partition_log_name(topic.topic_id, partition)
        reader = await self.open_log(name)
        if reader is None:
            return PartitionState(topic.name, partition, name, 0, 0, [])
        try:
            md = reader.metadata
            latest = await log_end_offset(md, functools.partial(reader.last_entry, confirmed_only=True))
            spans = _spans(md)
            first = next((s.first for s in spans), None)
            if first is None:
                got = await reader.read(reader.start, 1)
                first = batch_offsets(got[0].data)[0] if got else latest
            earliest = min(max(first, int(md.props.get(L_START, "0"))), latest)
            return PartitionState(topic.name, partition, name, earliest, latest, spans)
        finally:
            await reader.close()

    async def offset_for_time(self, st: PartitionState, ts: int) -> int | None:
        """The first offset whose record timestamp is >= ts (Kafka's ListOffsets by time);
        None if no record has one. The index narrows the scan to one index stride."""
        reader = await self.open_log(st.log)
        if reader is None:
            return None
        try:
            found = offset_index(reader.metadata).find_timestamp(ts)
            unindexed = [s for s in st.spans if s.max_ts is None]
            if found is not None:
                start = Position(found[0], found[1])
            elif unindexed:
                start = Position(unindexed[0].ledger_id, 0)
            else:
                return None
            async with aclosing(scan(reader, start)) as it:
                async for entries in it:
                    for e in entries:
                        b = RecordBatch(e.data)
                        if b.base_offset >= st.latest:
                            return None
                        if b.is_control or b.max_timestamp < ts or b.last_offset < st.earliest:
                            continue
                        if b.timestamp_type == TimestampType.LOG_APPEND_TIME:
                            return max(b.base_offset, st.earliest)
                        for r in b.records():
                            off = b.base_offset + r.offset_delta
                            if off >= st.earliest and b.base_timestamp + r.timestamp_delta >= ts:
                                return off
            return None
        finally:
            await reader.close()

    async def resolve(self, st: PartitionState, bound: Bound, *, starting: bool, strategy: str = "error") -> int:
        """A query's start or end offset in one partition."""
        which = "startingOffsets" if starting else "endingOffsets"
        tp = (st.topic, st.partition)
        if bound[0] == "earliest":
            return st.earliest
        if bound[0] == "latest":
            return st.latest
        if bound[0] == "offsets":
            if tp not in bound[1]:
                raise OptionError(f"If {which} contains specific offsets, you must specify all "
                                  f"TopicPartitions. Use -1 for latest, -2 for earliest. Missing: {tp[0]}-{tp[1]}")
            off = bound[1][tp]
            return st.earliest if off == EARLIEST else st.latest if off == LATEST else off
        ts_opt = "startingTimestamp" if starting else "endingTimestamp"
        if bound[0] == "timestamps":
            ts_opt = f"{'starting' if starting else 'ending'}OffsetsByTimestamp"
            if tp not in bound[1]:
                raise OptionError(f"Option '{ts_opt}' must specify every TopicPartition; missing {tp[0]}-{tp[1]}")
            ts = bound[1][tp]
        else:
            ts = bound[1]
        found = await self.offset_for_time(st, ts)
        if found is not None:
            return found
        if not starting or strategy == "latest":
            return st.latest
        raise OptionError(f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and "
                          f"timestamp {ts} (option '{ts_opt}'); set startingOffsetsByTimestampStrategy "
                          f"to latest to start from the end instead")

    async def read_range(
        self, sl: Slice, *, fail_on_data_loss: bool = True
    ) -> AsyncIterator[list[bytes | memoryview]]:
        """The stored batches holding offsets [sl.start, sl.end), one list per large read. A
        plan never counts past the LAC; if bookies still lag (a writer's explicit LAC on its
        way), the task waits for them, then fails rather than return less than planned (or,
        without `fail_on_data_loss`, returns what there is, as Spark's failOnDataLoss=false)."""
        reader = await self.open_log(sl.log)
        if reader is None:
            if fail_on_data_loss:
                raise DataLossError(f"partition {sl.topic}-{sl.partition}: its log is gone")
            return
        nxt = sl.start
        retry = Retry(LAC_BACKOFF, within=LAC_WAIT_S)
        try:
            while nxt < sl.end:
                view = KafkaLogView(reader, offset_index(reader.metadata))
                async with aclosing(view.batches(nxt)) as it:
                    async for entries in it:
                        out, past_end = [], False
                        for e in entries:
                            base, last = batch_offsets(e.data)
                            if base >= sl.end:
                                past_end = True
                                break
                            out.append(e.data)
                            nxt = last + 1
                        if out:
                            yield out
                        if past_end:
                            nxt = sl.end  # a gap (compaction, aborted records) runs up to the end
                        if nxt >= sl.end:
                            break
                if nxt < sl.end:
                    if not await retry.pause():
                        if not fail_on_data_loss:
                            return
                        raise DataLossError(f"partition {sl.topic}-{sl.partition}: offsets {nxt}..{sl.end} "
                                            f"are not readable (deleted, or not confirmed by the bookies)")
                    await reader.refresh()  # then re-read the ledger list and the LAC
        finally:
            await reader.close()


def plan_slices(st: PartitionState, start: int, end: int, *, min_ts: int | None = None,
                slice_bytes: int = SLICE_BYTES) -> list[Slice]:
    """Spark input partitions for offsets [start, end) of one partition: one per ledger or run
    of small consecutive ledgers; ledgers whose newest timestamp is below `min_ts` pruned."""
    start = max(start, st.earliest)
    ranges: list[tuple[int, int, list[int], int, int | None]] = []  # first, next, ledgers, size, max ts
    pending: list[LedgerSpan] = []  # unindexed ledgers: their end is the next known first offset
    lo, pending_lo = st.earliest, st.earliest
    for sp in st.spans:
        if sp.first is not None and pending:
            ranges.append((pending_lo, sp.first, [s.ledger_id for s in pending], sum(s.size for s in pending), None))
            pending = []
        if sp.first is not None and sp.next is not None:
            ranges.append((sp.first, sp.next, [sp.ledger_id], sp.size, sp.max_ts))
            lo = sp.next
        else:
            if not pending:
                pending_lo = sp.first if sp.first is not None else lo
            pending.append(sp)
    if pending:
        ranges.append((pending_lo, max(st.latest, pending_lo), [s.ledger_id for s in pending],
                       sum(s.size for s in pending), None))
    out: list[Slice] = []
    size = 0
    for first, nxt, ids, nbytes, max_ts in ranges:
        a, b = max(first, start), min(nxt, end)
        if a >= b or (min_ts is not None and max_ts is not None and max_ts < min_ts):
            continue
        prev = out[-1] if out else None
        if prev is not None and prev.end == a and size + nbytes <= slice_bytes:
            out[-1] = Slice(st.topic, st.partition, st.log, prev.start, b, prev.ledgers + tuple(ids))
            size += nbytes
        else:
            out.append(Slice(st.topic, st.partition, st.log, a, b, tuple(ids)))
            size = nbytes
    return out


TopicOffsets = dict[str, dict[str, int]]  # Spark's offset JSON: {"topic": {"partition": offset}}


def to_json_offsets(offsets: dict[TopicPartition, int]) -> TopicOffsets:
    out: TopicOffsets = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


def from_json_offsets(doc: TopicOffsets) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(off) for t, parts in doc.items() for p, off in parts.items()}
