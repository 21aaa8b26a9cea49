"""ShareFetch (v1-2): share sessions, piggybacked acknowledgements, and records acquired for
the member as whole stored batches (their offset ranges from batch headers; the records are
sent as stored and the client keeps those in its AcquiredRecords), or in key-shared mode as
single records by key (gateway/share_keys.py). Long polling wakes on appends
and on records coming back (lock expiry, release)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gateway.context import RequestContext
from gateway.delayed_delivery import DELAY_CONFIG, ENABLE_CONFIG, due_times
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from gateway.share_keys import record_keys
from gateway.shares import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SharePartitions,
    apply_acknowledgements,
    persist_acknowledged,
    release_session,
)
from kafka_log.txn import AbortedFilter
from kafka_log.view import batch_offsets
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from kafka_wire.records import BATCH_OVERHEAD, RecordBatch
from store.tasks import within

if TYPE_CHECKING:
    from coordinator.share.partition import SharePartition
    from gateway.partition.log import PartitionLog

Resp = ShareFetchResponse
log = logging.getLogger(__name__)
DEFAULT_MAX_RECORDS = 500
READ_CHUNK = 1 << 20  # a share fetch's first read of a partition, doubling while records are wanted


def _no_leader() -> Resp.LeaderIdAndEpoch:
    return Resp.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)


def _whole_batches(
    bufs: Sequence[bytes | memoryview], aborted: list[tuple[int, int]] | None = None
) -> tuple[list[tuple[int, int, bytes | memoryview]], frozenset[int]]:
    """(base, last offset, bytes) of every complete batch read (a cut-off last one is dropped),
    and the base offsets of those holding nothing for a consumer: control batches, and with
    `aborted` (read_committed's aborted transactions the read overlaps) those transactions'
    batches, as AbortedFilter decides."""
    out = []
    skip = set()
    aborts = AbortedFilter(aborted or ())
    for b in bufs:
        if len(b) < BATCH_OVERHEAD or len(b) < (batch := RecordBatch(b)).size:
            break
        base, last = batch_offsets(b)
        out.append((base, last, b))
        if aborts.skip(batch):
            skip.add(base)
    return out, frozenset(skip)


async def share_fetch(ctx: RequestContext, req: ShareFetchRequest) -> Resp:
    if not req.group_id:
        return Resp(error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId must be set")
    if not req.member_id:
        return Resp(error_code=ErrorCode.INVALID_REQUEST, error_message="MemberId must be set")
    shares = ctx.services.share_partitions()
    group, member = req.group_id, req.member_id
    try:
        session = shares.session(group, member, req.share_session_epoch)
    except KafkaApiError as e:
        return Resp(error_code=e.error_code, error_message=e.message)
    cache = TopicCache(ctx.services.topics, ctx.services.partitions)
    parts: dict[tuple[uuid.UUID, int], Resp.PartitionData] = {}

    def part(key: tuple[uuid.UUID, int]) -> Resp.PartitionData:
        if key not in parts:
            # records is not nullable: an empty record set when nothing was acquired
            parts[key] = Resp.PartitionData(partition_index=key[1], current_leader=_no_leader(), records=b"")
        return parts[key]

    final = req.share_session_epoch == FINAL_EPOCH
    for f in req.forgotten_topics_data:
        for index in f.partitions:
            if (f.topic_id, index) in session.partitions:
                session.partitions.remove((f.topic_id, index))
    # Acknowledgements are applied now and stored with what this request acquires: one write of
    # the share-partition's state before the answer, not one for the acks and one for the records.
    unsaved = _Unsaved(part)
    for t in req.topics:
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            if key not in session.partitions and not final:
                session.partitions.append(key)
            if p.acknowledgement_batches:
                code, msg, sp = await apply_acknowledgements(shares, cache, group, member, t.topic_id,
                                                             p.partition_index, p.acknowledgement_batches)
                unsaved.add(key, sp, code, msg)
    if final:
        release_session(shares, session)
    elif req.is_renew_ack:
        pass  # a request renewing locks acquires nothing (KIP-1222)
    else:
        if req.share_session_epoch == INITIAL_EPOCH:
            await _apply_resets(shares, cache, group, session.partitions)
        await _acquire(ctx, req, session.partitions, cache, group, member, part, unsaved)
    await unsaved.persist()
    config = await shares.config_in_force(group, session.partitions)
    by_topic: dict[uuid.UUID, list[Resp.PartitionData]] = {}
    for (tid, _), pd in parts.items():
        by_topic.setdefault(tid, []).append(pd)
    return Resp(
        acquisition_lock_timeout_ms=config.record_lock_duration_ms,
        responses=[Resp.ShareFetchableTopicResponse(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()],
    )


class _Unsaved:
    """Partitions whose acknowledgements were applied and not stored yet, with their results."""

    def __init__(self, part: Callable[[tuple[uuid.UUID, int]], Resp.PartitionData]) -> None:
        self._part = part
        self._sps: dict[tuple[uuid.UUID, int], SharePartition] = {}

    def add(self, key: tuple[uuid.UUID, int], sp: SharePartition | None, code: int, msg: str | None) -> None:
        pd = self._part(key)
        pd.acknowledge_error_code, pd.acknowledge_error_message = code, msg
        if sp is not None:
            self._sps[key] = sp

    def stored(self, key: tuple[uuid.UUID, int], error: Exception | None = None) -> None:
        """The partition's state was persisted (or failed to be, with `error`) since its acks."""
        if self._sps.pop(key, None) is not None and error is not None:
            pd = self._part(key)
            pd.acknowledge_error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            pd.acknowledge_error_message = "the partition moved before the acknowledgement was stored"

    async def persist(self) -> None:
        """Store the rest, all at once (before the answer, and before a long poll waits)."""
        if not self._sps:
            return
        keys, sps = list(self._sps), list(self._sps.values())
        self._sps.clear()
        results = await asyncio.gather(*(persist_acknowledged(sp, ErrorCode.NONE, None) for sp in sps))
        for key, (code, msg) in zip(keys, results, strict=True):
            if code:
                pd = self._part(key)
                pd.acknowledge_error_code, pd.acknowledge_error_message = code, msg


async def _apply_resets(
    shares: SharePartitions, cache: TopicCache, group: str, keys: list[tuple[uuid.UUID, int]]
) -> None:
    """A session opens: offsets altered or deleted while the group was empty take effect."""
    plogs = []
    for key in keys:
        with contextlib.suppress(KafkaApiError):
            plogs.append((await cache.log(*key))[1])
    try:
        await shares.apply_resets(group, plogs)
    except Exception as e:
        log.warning("share group %s: offset resets not applied: %r", group, e)


async def _read_and_acquire(
    plog: PartitionLog, sp: SharePartition, member: str, want: int, max_bytes: int, min_one: bool,
    members: Sequence[str] = (),
) -> tuple[list[tuple[int, int, bytes | memoryview]], list[tuple[int, int, int]], bool]:
    """Read from the share-partition's fetch start and acquire, until `want` records, the end of
    the readable log, the in-flight limit or `max_bytes`: (batches read, acquired runs, whether
    nothing was acquired but delayed records were held back: reading on finds more). Read in
    chunks that grow from READ_CHUNK, not `max_bytes` at once: clients ask for up to 50 MB
    (fetch.max.bytes) to get a few hundred records, and every fetch would read and scan it all.
    `members`: in key-shared mode, the members fetching from the partition now."""
    committed = sp.config.read_committed
    end = plog.last_stable_offset if committed else plog.high_watermark
    start, chunk, left = sp.fetch_start(), READ_CHUNK, max_bytes
    batches: list[tuple[int, int, bytes | memoryview]] = []
    runs: list[tuple[int, int, int]] = []
    got, end_before, delaying = 0, sp.end, False
    delay_ms, enabled = plog.topic.config_int(DELAY_CONFIG), plog.topic.config(ENABLE_CONFIG) == "true"
    while got < want and start < end and left > 0:
        size, first = min(chunk, left), min_one and not runs
        if committed:
            bufs, aborted = await plog.read_committed(start, size, min_one=first)
        else:
            bufs, aborted = await plog.read(start, size, min_one=first), None
        found, skip = _whole_batches(bufs, aborted)
        if not found:
            break
        due = due_times(delay_ms, enabled, found)
        delaying = delaying or due is not None
        keys = record_keys(found) if sp.config.key_shared else None
        new = sp.acquire(member, [(b, la) for b, la, _ in found], want - got, skip, due, keys, members)
        got += sum(la - f + 1 for f, la, _ in new)
        runs += new
        batches += found
        left -= sum(len(d) for _, _, d in found)
        if sp.end <= found[-1][1]:
            break  # acquisition stopped inside what was read (max records or the in-flight limit)
        start, chunk = found[-1][1] + 1, chunk * 2
    return batches, runs, delaying and not runs and sp.end > end_before


async def _acquire(
    ctx: RequestContext, req: ShareFetchRequest, keys: list[tuple[uuid.UUID, int]], cache: TopicCache,
    group: str, member: str, part: Callable[[tuple[uuid.UUID, int]], Resp.PartitionData], unsaved: _Unsaved,
) -> None:
    shares = ctx.services.share_partitions()
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    max_records = req.max_records if req.max_records > 0 else DEFAULT_MAX_RECORDS
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    while True:
        got, waitables, more = 0, [], False
        remaining_bytes = max_bytes
        for key in list(keys):
            try:
                _, plog = await cache.log(*key)
                sp = await shares.get(group, plog)
                assert sp is not None
            except KafkaApiError as e:
                pd = part(key)
                pd.error_code, pd.error_message = e.error_code, e.message
                continue
            waitables.append((plog, shares.entry_of(group, plog)))
            if got >= max_records or remaining_bytes <= 0:
                continue
            sp.skip_to(plog.log_start_offset)
            if not sp.has_available(plog.last_stable_offset if sp.config.read_committed else plog.high_watermark):
                continue
            # Key-shared mode spreads keys over the members fetching now: sessions used within a
            # lock's duration (a crashed member's keys move once its locks could have expired).
            members = (shares.fetching_members(group, key, sp.config.record_lock_duration_ms / 1000)
                       if sp.config.key_shared else ())
            try:
                batches, runs, held = await _read_and_acquire(plog, sp, member, max_records - got, remaining_bytes,
                                                              got == 0, members)
            except KafkaApiError as e:
                pd = part(key)
                pd.error_code, pd.error_message = e.error_code, e.message
                continue
            if not runs:
                # Only held-back records so far: read on at once rather than wait for a wake.
                more = more or held
                continue
            try:
                await sp.persist()  # the delivery counts (and the acks applied) survive a takeover
            except Exception as e:
                unsaved.stored(key, e)
                sp.release_member(member)
                pd = part(key)
                pd.error_code, pd.error_message = ErrorCode.NOT_LEADER_OR_FOLLOWER, f"not stored: {e!r}"
                continue
            unsaved.stored(key)
            send = [data for base, last, data in batches if any(f <= last and base <= la for f, la, _ in runs)]
            records = b"".join(bytes(d) for d in send)
            pd = part(key)
            pd.records = records
            pd.acquired_records = [Resp.AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c)
                                   for f, la, c in runs]
            got += sum(la - f + 1 for f, la, _ in runs)
            remaining_bytes -= len(records)
        await unsaved.persist()
        remaining = deadline - time.monotonic()
        if got or remaining <= 0 or not waitables or (req.min_bytes <= 0 and req.max_wait_ms <= 0):
            return
        if more:
            continue
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for plog, entry in waitables:
            plog.add_waiter(woken)
            if entry is not None:
                entry.waiters.add(woken)
        try:
            await within(asyncio.shield(woken), remaining)
        except TimeoutError:
            return
        finally:
            for plog, entry in waitables:
                plog.remove_waiter(woken)
                if entry is not None:
                    entry.waiters.discard(woken)
