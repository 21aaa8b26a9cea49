"""The `quire` PySpark data source (PySpark 4 Python Data Source API): batch and streaming
reads with Spark's Kafka-source options and rows, planned from the segmented-log metadata (one
Spark task per ledger or run of small ledgers) and read straight from the bookies by the tasks.

    pipeline.register(spark)
    df = (spark.read.format("quire").option("quire.meta", "zk://zk:2181/quire")
          .option("subscribe", "orders").load())
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafka_log.txn import AbortedFilter
from pipeline import options as opt
from pipeline.committed import Committed, committed
from pipeline.logs import (
    PartitionState,
    Quire,
    Slice,
    TopicOffsets,
    from_json_offsets,
    plan_slices,
    to_json_offsets,
)
from pipeline.pacing import DEFAULT_HEADROOM, Headroom, Pace
from pipeline.rows import arrow_schema, kafka_schema, to_arrow

T = TypeVar("T")
R = TypeVar("R")
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
PREFETCH = 2  # Arrow batches (one per large bookie read) a task reads ahead of Spark
_END = object()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Spark calls the source from plain Python workers: one event loop per call."""
    return asyncio.run(coro)


def iterate(make: Callable[[], AsyncIterator[T]], depth: int = PREFETCH) -> Iterator[T]:
    """An async generator stepped from a synchronous one (Spark's `read` is synchronous), run
    on its own thread and event loop up to `depth` items ahead: bookie reads and decoding go on
    while Spark sends the previous batch to the JVM (stepped in the caller's thread, each
    waited for the other)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="quire-read", daemon=True)
    thread.start()

    async def start() -> tuple[asyncio.Queue[tuple[Any, BaseException | None]], asyncio.Task[None]]:
        q: asyncio.Queue[tuple[Any, BaseException | None]] = asyncio.Queue(depth)

        async def pump() -> None:
            try:
                agen = make()
                try:
                    async for item in agen:
                        await q.put((item, None))
                finally:
                    await agen.aclose()  # type: ignore[attr-defined]
                await q.put((_END, None))
            except Exception as e:
                await q.put((_END, e))

        return q, asyncio.create_task(pump())

    def call(coro: Coroutine[Any, Any, R]) -> R:
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    async def finish(task: asyncio.Task[None]) -> None:
        task.cancel()  # the consumer stopped early: close the reader (its connections) now
        await asyncio.gather(task, return_exceptions=True)

    try:
        q, task = call(start())
        try:
            while True:
                item, err = call(q.get())
                if err is not None:
                    raise err
                if item is _END:
                    return
                yield item
        finally:
            call(finish(task))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


@dataclass
class Pruning:
    """What pushed-down filters on partition, offset and timestamp allow skipping. Spark still
    evaluates every filter, so pruning only has to be conservative."""

    partitions: set[int] | None = None
    min_offset: int = 0
    max_offset: int | None = None  # exclusive
    min_ts: int | None = None  # milliseconds
    seen: list[Filter] = field(default_factory=list)

    def add(self, f: Filter) -> None:
        col: tuple[str, ...] = getattr(f, "attribute", ())
        if len(col) != 1 or col[0] not in ("partition", "offset", "timestamp"):
            return
        name, value = col[0], getattr(f, "value", None)
        if value is None:
            return
        if name == "timestamp":
            ms = _millis(value) if not isinstance(f, In) else None
            if ms is not None and isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)):
                self.min_ts = max(self.min_ts or ms, ms)
            return
        raw: list[Any] = list(value) if isinstance(f, In) else [value]
        if not raw or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
            return
        values: list[int] = [int(v) for v in raw]
        if name == "partition":
            if isinstance(f, (EqualTo, In)):
                got = set(values)
                self.partitions = got if self.partitions is None else self.partitions & got
            return
        v = values[0]
        if isinstance(f, EqualTo):
            self.min_offset, self.max_offset = max(self.min_offset, v), _min(self.max_offset, v + 1)
        elif isinstance(f, In):
            self.min_offset = max(self.min_offset, min(values))
            self.max_offset = _min(self.max_offset, max(values) + 1)
        elif isinstance(f, GreaterThan):
            self.min_offset = max(self.min_offset, v + 1)
        elif isinstance(f, GreaterThanOrEqual):
            self.min_offset = max(self.min_offset, v)
        elif isinstance(f, LessThan):
            self.max_offset = _min(self.max_offset, v)
        elif isinstance(f, LessThanOrEqual):
            self.max_offset = _min(self.max_offset, v + 1)

    def clip(self, start: int, end: int) -> tuple[int, int]:
        end = end if self.max_offset is None else min(end, self.max_offset)
        return max(start, self.min_offset), end


def _min(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)


def _millis(v: object) -> int | None:
    """A pushed-down timestamp literal in ms (PySpark gives naive datetimes in local time, as
    `timestamp()` reads them), floored: a conservative lower bound."""
    if isinstance(v, dt.datetime):
        return int(v.timestamp() * 1000)
    return None


async def _states(q: Quire, o: opt.SourceOptions, parts: set[int] | None = None) -> list[PartitionState]:
    tps = [(t, p) for t, p in await q.topic_partitions(o) if parts is None or p in parts]
    return list(await asyncio.gather(*(q.state(t, p) for t, p in tps)))


async def _committed(q: Quire, o: opt.SourceOptions, states: list[PartitionState],
                     previous: dict[opt.TopicPartition, Committed] | None = None
                     ) -> dict[opt.TopicPartition, Committed] | None:
    """read_committed: each partition's LSO and aborted transactions (None: read_uncommitted),
    going on from `previous` ones."""
    if not o.read_committed:
        return None
    old = previous or {}
    got = await asyncio.gather(*(committed(q, st, old.get((st.topic, st.partition))) for st in states))
    return {(st.topic, st.partition): c for st, c in zip(states, got)}


async def _plan_batch(o: opt.SourceOptions, pruning: Pruning) -> list[Slice]:
    async with Quire(o.meta_url, o.offload) as q:
        out: list[Slice] = []
        states = await _states(q, o, pruning.partitions)
        txns = await _committed(q, o, states)
        for st in states:
            c = txns[(st.topic, st.partition)] if txns is not None else None
            st = c.stable(st) if c is not None else st
            start = await q.resolve(st, o.starting, starting=True, strategy=o.timestamp_strategy)
            end = await q.resolve(st, o.ending, starting=False)
            start, end = pruning.clip(start, end)
            if c is not None:
                end = min(end, c.lso)  # never into open transactions, even when asked
            slices = plan_slices(st, start, end, min_ts=pruning.min_ts, slice_bytes=o.slice_bytes)
            out.extend(c.mark(slices) if c is not None else slices)
        return out


async def pacers_of(o: opt.SourceOptions, q: Quire) -> list[Pace | Headroom]:
    """What paces a task's reads: `quire.maxBytesPerSecond`, and `quire.cpuHeadroom` (unset:
    DEFAULT_HEADROOM where the task shares a machine with one of the cluster's bookies, none
    elsewhere; 0: none)."""
    out: list[Pace | Headroom] = []
    if o.max_bytes_per_second:
        out.append(Pace(o.max_bytes_per_second))
    share = o.cpu_headroom
    if share is None:
        share = DEFAULT_HEADROOM if await q.beside_a_bookie() else 0.0
    if share:
        out.append(Headroom.shared(share))
    return out


class SliceReader:
    """Reading planned slices in a task: Arrow record batches, one per large bookie read."""

    opts: opt.SourceOptions
    schema: StructType

    def _read(self, sl: Slice) -> Iterator[pa.RecordBatch]:
        schema = arrow_schema(self.schema)

        async def batches() -> AsyncIterator[pa.RecordBatch]:
            # read_committed: the aborted transactions' batches dropped before decoding
            keep = AbortedFilter(sl.aborted).keep if sl.aborted is not None else None
            async with Quire(self.opts.meta_url, self.opts.offload) as q:
                pacers = await pacers_of(self.opts, q)
                async for chunk in q.read_range(sl, fail_on_data_loss=self.opts.fail_on_data_loss):
                    if pacers:
                        n = sum(len(b) for b in chunk)
                        for p in pacers:
                            await p.read(n)
                    yield to_arrow(keep(chunk) if keep else chunk, sl.topic, sl.partition, sl.start, sl.end, schema)

        for rb in iterate(batches):
            if rb.num_rows:
                yield rb


class QuireBatchReader(SliceReader, DataSourceReader):
    def __init__(self, o: opt.SourceOptions, schema: StructType) -> None:
        self.opts = o
        self.schema = schema
        self.pruning = Pruning()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for f in filters:
            self.pruning.add(f)
        return filters  # all still evaluated by Spark: pruning skips ledgers, never rows

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(sl) for sl in run(_plan_batch(self.opts, self.pruning))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._read(partition.value)


def rate_limit(start: dict[opt.TopicPartition, int], latest: dict[opt.TopicPartition, int],
               max_rows: int) -> dict[opt.TopicPartition, int]:
    """End offsets at most `max_rows` offsets past `start` in all, shared in proportion to each
    partition's backlog (as Spark's Kafka source does with maxOffsetsPerTrigger)."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = {tp: max_rows * n // total for tp, n in backlog.items()}
    left = max_rows - sum(share.values())
    for tp in sorted(backlog):
        extra = min(left, backlog[tp] - share[tp])
        share[tp] += extra
        left -= extra
    return {tp: start.get(tp, latest[tp]) + share[tp] for tp in latest}


class QuireStreamReader(SliceReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stream offsets are Spark's Kafka-source JSON ({"topic": {"partition": offset}}), so a
    checkpoint holds exactly which offsets each micro-batch covered."""

    def __init__(self, o: opt.SourceOptions, schema: StructType) -> None:
        self.opts = o
        self.schema = schema
        self.target: dict[opt.TopicPartition, int] | None = None  # Trigger.AvailableNow's end
        self.txns: dict[opt.TopicPartition, Committed] = {}  # read_committed: as of the last latestOffset

    async def _stable(self, q: Quire) -> list[PartitionState]:
        """The partitions, with "latest" their LSO when read_committed."""
        states = await _states(q, self.opts)
        txns = await _committed(q, self.opts, states, self.txns)
        if txns is None:
            return states
        self.txns = txns
        return [txns[(st.topic, st.partition)].stable(st) for st in states]

    def _latest(self) -> dict[opt.TopicPartition, int]:
        async def go() -> dict[opt.TopicPartition, int]:
            async with Quire(self.opts.meta_url, self.opts.offload) as q:
                return {(st.topic, st.partition): st.latest for st in await self._stable(q)}

        return run(go())

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def initialOffset(self) -> dict:
        async def go() -> TopicOffsets:
            async with Quire(self.opts.meta_url, self.opts.offload) as q:
                out = {}
                for st in await self._stable(q):
                    out[(st.topic, st.partition)] = await q.resolve(
                        st, self.opts.starting, starting=True, strategy=self.opts.timestamp_strategy)
                return to_json_offsets(out)

        return run(go())

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_offsets(start)
        now = self.target if self.target is not None else self._latest()
        # partitions that appeared since `start` are read from their beginning
        latest = {tp: max(off, begin.get(tp, 0)) for tp, off in now.items()}
        latest.update({tp: off for tp, off in begin.items() if tp not in latest})
        begin = {tp: begin.get(tp, 0) for tp in latest}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json_offsets(latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = from_json_offsets(start), from_json_offsets(end)

        async def go() -> list[Slice]:
            async with Quire(self.opts.meta_url, self.opts.offload) as q:
                out: list[Slice] = []
                for st in await _states(q, self.opts):
                    tp = (st.topic, st.partition)
                    if tp not in until:
                        continue
                    slices = plan_slices(st, begin.get(tp, 0), until[tp], slice_bytes=self.opts.slice_bytes)
                    if self.opts.read_committed:
                        c = self.txns.get(tp)
                        if c is None or c.lso < until[tp]:  # planned by an earlier run of the query
                            c = await committed(q, st)
                        slices = c.mark(slices)
                    out.extend(slices)
                return out

        if begin == until:
            return []
        return [InputPartition(sl) for sl in run(go())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._read(partition.value)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: the log is read, never consumed


class QuireDataSource(DataSource):
    """`format("quire")`: Spark's Kafka-source options plus `quire.meta` (zk:// URL or a
    standalone's data dir)."""

    @classmethod
    def name(cls) -> str:
        return "quire"

    def schema(self) -> StructType:
        return kafka_schema(str(self.options.get("includeHeaders", "false")).strip().lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return QuireBatchReader(opt.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return QuireStreamReader(opt.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pipeline.sink import QuireWriter

        return QuireWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pipeline.sink import QuireStreamWriter

        return QuireStreamWriter(self.options, schema)
