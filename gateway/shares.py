"""Glue between the gateway and coordinator/share on a partition's owner: one SharePartition per
(share group, owned partition), its state persisted on the partition log's durable cursor
`share:<group>` (mark-delete follows the SPSO, so retention keeps what the group has not
finished; the offset-exact SPSO and the spans are the cursor's properties, written to its
ledger), and the share sessions of ShareFetch/ShareAcknowledge (KIP-932 ShareSessionCache)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from coordinator.group.config import GroupConfig
from coordinator.share.config import AUTO_OFFSET_RESET_EARLIEST, MODE_KEY_SHARED, ShareConfig, by_duration_ms
from coordinator.share.dead_letters import SourceRecord, drain
from coordinator.share.partition import (
    InvalidRecordState,
    SharePartition,
    StoredSpan,
    decode_spans,
    encode_spans,
)
from gateway.dead_letters import DeadLetterSink, append_dead_letters, read_records
from gateway.errors import KafkaApiError
from gateway.group_configs import (
    BACKOFF_MAX,
    BACKOFF_MIN,
    BACKOFF_MULTIPLIER,
    DLQ_COPY_RECORD,
    DLQ_TOPIC,
    RENEW_ACK,
    SHARE_MODE,
    GroupConfigCache,
    limits,
)
from gateway.partition.lookup import TopicCache
from gateway.share_offsets import DELETED, SharePublisher, clear_resets, read_resets, reset_key, stats_of
from kafka_wire.errors import ErrorCode
from store.managed.cursor import ManagedCursor
from store.managed.position import Position
from store.tasks import retrieve_outcome

if TYPE_CHECKING:
    from gateway.partition.log import PartitionLog
    from store.meta.api import MetaStore

log = logging.getLogger(__name__)

CURSOR_PREFIX = "share:"
SPSO_PROP = "share.spso"
SPANS_PROP = "share.spans"
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
PartitionKey = tuple[uuid.UUID, int]


class CursorShareStore:
    """A share-partition's state on its cursor: SPSO and spans as properties (one delta record
    per save, size following the spans), mark-delete at the entry before the SPSO's."""

    def __init__(self, cursor: ManagedCursor, plog: PartitionLog, on_saved: Callable[[], None] | None = None) -> None:
        self.cursor = cursor
        self.plog = plog
        self.on_saved = on_saved

    async def save(self, spso: int, spans: list[StoredSpan]) -> None:
        if spso >= self.plog.high_watermark:
            pos = self.plog.ml.next_position(self.plog.ml.last_confirmed)
        else:
            pos = await self.plog.position_of(max(spso, self.plog.log_start_offset))
        target = Position(pos.ledger_id, pos.entry_id - 1)
        props = self.cursor.set_properties({SPSO_PROP: str(spso), SPANS_PROP: encode_spans(spans)})
        # Started together, the cursor's writer stores both in one record: one ledger write per
        # save, where awaiting one then the other took two on every ShareFetch and acknowledgement.
        if target > self.cursor.mark_delete:
            await asyncio.gather(props, self.cursor.mark_delete_to(target))
        elif target < self.cursor.mark_delete:
            await asyncio.gather(props, self.cursor.seek(pos))  # moved back (AlterShareGroupOffsets)
        else:
            await props
        if self.on_saved is not None:
            self.on_saved()


@dataclass
class _Entry:
    plog: PartitionLog
    sp: SharePartition
    waiters: set[asyncio.Future[None]] = field(default_factory=set)
    dead_lettering: asyncio.Task[None] | None = None

    def wake(self) -> None:
        for w in self.waiters:
            if not w.done():
                w.set_result(None)


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: list[PartitionKey] = field(default_factory=list)
    last_used: float = 0.0  # monotonic seconds


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


async def _initial_spso(config: ShareConfig, plog: PartitionLog) -> int:
    """A new share-partition's start offset, by share.auto.offset.reset: the log start, the first
    record at most the by_duration's age (the end if none is), or the end."""
    if config.auto_offset_reset == AUTO_OFFSET_RESET_EARLIEST:
        return plog.log_start_offset
    duration_ms = by_duration_ms(config.auto_offset_reset)
    if duration_ms is not None:
        found = await plog.offset_for_timestamp(int(time.time() * 1000) - duration_ms)
        if found is not None:
            return found[1]
    return plog.high_watermark


class SharePartitions:
    """Every share-partition this gateway serves, and the share sessions."""

    def __init__(self, config: ShareConfig, meta: MetaStore, dead_letters: DeadLetterSink,
                 group_configs: GroupConfigCache | None = None) -> None:
        self.config = config
        self.meta = meta
        self.group_configs = group_configs or GroupConfigCache(meta, limits(config, GroupConfig()))
        self.dead_letters = dead_letters
        self._entries: dict[tuple[str, uuid.UUID, int], _Entry] = {}
        self._locks: dict[tuple[str, uuid.UUID, int], asyncio.Lock] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.publisher = SharePublisher(meta)

    async def get(self, group_id: str, plog: PartitionLog, *, create: bool = True) -> SharePartition | None:
        key = (group_id, plog.topic.topic_id, plog.partition)
        e = self._entries.get(key)
        if e is not None and e.plog is plog and not plog.lost:
            return e.sp
        if not create:
            return None
        async with self._locks.setdefault(key, asyncio.Lock()):
            e = self._entries.get(key)
            if e is not None and e.plog is plog and not plog.lost:
                return e.sp
            if e is not None:
                self._drop(key)
            e = await self._open(group_id, plog)
            self._entries[key] = e
            plog.add_lost_listener(lambda: self._drop(key, e))
            self._kick_dead_letters(group_id, e)  # ARCHIVING records a previous owner left
            return e.sp

    async def _open(self, group_id: str, plog: PartitionLog) -> _Entry:
        name = CURSOR_PREFIX + group_id
        try:
            cur = await plog.ml.open_cursor(name, "latest")
        except Exception as e:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"share-partition state: {e!r}") from e
        props = cur.properties
        holder: list[_Entry] = []
        store = CursorShareStore(cur, plog, lambda: self._saved(group_id, holder[0]))
        config = await self.group_share_config(group_id)
        if SPSO_PROP in props:
            spso = int(props[SPSO_PROP])
            stored = decode_spans(props.get(SPANS_PROP, ""))
            sp = SharePartition(spso, config, store=store, stored=stored, on_available=lambda: holder[0].wake())
            sp.skip_to(plog.log_start_offset)
        else:
            spso = await _initial_spso(config, plog)
            sp = SharePartition(spso, config, store=store, on_available=lambda: holder[0].wake())
        holder.append(_Entry(plog, sp))
        if SPSO_PROP not in props:
            await sp.persist()  # the initial SPSO is fixed from now on
        return holder[0]

    def _saved(self, group_id: str, e: _Entry) -> None:
        """A share-partition's state is durable: publish its counts; dead-letter what it holds
        ARCHIVING (only now: the ARCHIVING state must be stored before the copy is made)."""
        self.publisher.note(e.plog, group_id, stats_of(e.sp, e.plog.high_watermark))
        if self.entry_of(group_id, e.plog) is e:
            self._kick_dead_letters(group_id, e)

    def _kick_dead_letters(self, group_id: str, e: _Entry) -> None:
        if not e.sp.dead_letters() or (e.dead_lettering is not None and not e.dead_lettering.done()):
            return  # a running task re-checks before it ends
        e.dead_lettering = asyncio.get_running_loop().create_task(self._dead_letter(group_id, e))

    async def _dead_letter(self, group_id: str, e: _Entry) -> None:
        sp, plog = e.sp, e.plog

        def alive() -> bool:
            return self.entry_of(group_id, plog) is e and not plog.lost

        async def append(batch: bytes) -> None:
            if sp.config.dlq_topic:  # else the group's DLQ was unset since: archive only
                await append_dead_letters(self.dead_letters, sp.config.dlq_topic, plog.partition, batch)

        async def read(first: int, last: int) -> list[SourceRecord]:
            return await read_records(plog, first, last)

        retry = 0.5
        while alive() and sp.dead_letters():
            try:
                await drain(sp, group_id, plog.topic.name, plog.partition, read, append, alive=alive)
            except Exception as ex:  # the records stay ARCHIVING: retried, or by the next owner
                log.warning("share group %s, %s-%d: dead-lettering failed, retrying in %.1fs: %r",
                            group_id, plog.topic.name, plog.partition, retry, ex)
                await asyncio.sleep(retry)
                retry = min(retry * 2, 30.0)

    async def group_share_config(self, group_id: str) -> ShareConfig:
        """The gateway's share settings with the group's own configs over them (no metadata read
        while the group's configs are unchanged: GroupConfigCache)."""
        overrides = await self.group_configs.get(group_id)
        out = dataclasses.replace(self.config)
        if "share.auto.offset.reset" in overrides:
            out.auto_offset_reset = overrides["share.auto.offset.reset"].lower()
        if "share.record.lock.duration.ms" in overrides:
            out.record_lock_duration_ms = int(overrides["share.record.lock.duration.ms"])
        if "share.session.timeout.ms" in overrides:
            out.session_timeout_ms = int(overrides["share.session.timeout.ms"])
        if "share.heartbeat.interval.ms" in overrides:
            out.heartbeat_interval_ms = int(overrides["share.heartbeat.interval.ms"])
        if "share.delivery.count.limit" in overrides:
            out.delivery_count_limit = int(overrides["share.delivery.count.limit"])
        if "share.partition.max.record.locks" in overrides:
            out.partition_max_record_locks = int(overrides["share.partition.max.record.locks"])
        out.read_committed = overrides.get("share.isolation.level", "").lower() == "read_committed"
        if BACKOFF_MIN in overrides:
            out.redelivery_backoff_min_ms = int(overrides[BACKOFF_MIN])
        if BACKOFF_MAX in overrides:
            out.redelivery_backoff_max_ms = int(overrides[BACKOFF_MAX])
        if BACKOFF_MULTIPLIER in overrides:
            out.redelivery_backoff_multiplier = float(overrides[BACKOFF_MULTIPLIER])
        out.dlq_topic = overrides.get(DLQ_TOPIC, "").strip()
        out.dlq_copy_record = overrides.get(DLQ_COPY_RECORD, "").lower() == "true"
        out.key_shared = overrides.get(SHARE_MODE, "").lower() == MODE_KEY_SHARED
        out.renew_acknowledge_enable = overrides.get(RENEW_ACK, "true").lower() == "true"
        return out

    async def config_in_force(self, group_id: str, keys: Sequence[PartitionKey]) -> ShareConfig:
        """The group's share config as a share-partition of these serves it (fixed when it was
        opened: no metadata read on every ShareFetch), else as the group's configs say now."""
        for tid, index in keys:
            e = self._entries.get((group_id, tid, index))
            if e is not None and not e.plog.lost:
                return e.sp.config
        return await self.group_share_config(group_id)

    def _drop(self, key: tuple[str, uuid.UUID, int], entry: _Entry | None = None) -> None:
        e = self._entries.get(key)
        if e is None or (entry is not None and e is not entry):
            return
        del self._entries[key]
        e.sp.close()
        if e.dead_lettering is not None:
            e.dead_lettering.cancel()
        e.wake()

    def entry_of(self, group_id: str, plog: PartitionLog) -> _Entry | None:
        e = self._entries.get((group_id, plog.topic.topic_id, plog.partition))
        return e if e is not None and e.plog is plog else None

    def of_group(self, group_id: str) -> list[tuple[PartitionLog, SharePartition]]:
        return [(e.plog, e.sp) for (g, _, _), e in self._entries.items() if g == group_id and not e.plog.lost]

    # ---- sessions --------------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with `epoch` continues (or opens, for epoch 0); KafkaApiError
        SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH otherwise. Epoch -1 closes it
        (the caller releases what the member holds)."""
        key = (group_id, member_id)
        now = time.monotonic()
        if epoch == INITIAL_EPOCH:
            self._evict_idle(now)
            s = self.sessions[key] = ShareSession(group_id, member_id, last_used=now)
            return s
        found = self.sessions.get(key)
        if found is None:
            raise KafkaApiError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}")
        s = found
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return s
        if epoch != s.epoch:
            raise KafkaApiError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"share session epoch {epoch}, expected {s.epoch}"
            )
        s.epoch = next_epoch(s.epoch)
        s.last_used = now
        return s

    def fetching_members(self, group_id: str, key: PartitionKey, within_s: float) -> list[str]:
        """Members whose share sessions include the partition and were used in the last
        `within_s` seconds (key-shared mode spreads keys over them)."""
        now = time.monotonic()
        return sorted(m for (g, m), s in self.sessions.items()
                      if g == group_id and now - s.last_used <= within_s and key in s.partitions)

    def _evict_idle(self, now: float) -> None:
        """Sessions of members gone without closing them (their records return by lock expiry
        anyway): dropped once idle for twice the member session timeout."""
        idle = 2 * self.config.session_timeout_ms / 1000
        for key, s in list(self.sessions.items()):
            if now - s.last_used > idle:
                del self.sessions[key]

    async def apply_resets(self, group_id: str, plogs: list[PartitionLog]) -> None:
        """Apply the Alter/DeleteShareGroupOffsets waiting for these owned partitions."""
        resets = await read_resets(self.meta, group_id)
        if not resets:
            return
        done = set()
        for plog in plogs:
            rk = reset_key(plog.topic.topic_id, plog.partition)
            if rk not in resets or plog.lost:
                continue
            key = (group_id, plog.topic.topic_id, plog.partition)
            async with self._locks.setdefault(key, asyncio.Lock()):
                self._drop(key)
                name = CURSOR_PREFIX + group_id
                offset = resets[rk]
                if offset == DELETED:
                    if name in plog.ml.cursors:
                        await plog.ml.delete_cursor(name)
                    self.publisher.note(plog, group_id, None)
                else:
                    cur = await plog.ml.open_cursor(name, "latest")
                    spso = min(max(offset, plog.log_start_offset), plog.high_watermark)
                    await CursorShareStore(cur, plog).save(spso, [])
                    self.publisher.note(plog, group_id, [spso, plog.high_watermark - spso, 0, 0])
            done.add(rk)
        if done:
            await clear_resets(self.meta, group_id, done)

    async def close(self) -> None:
        for key in list(self._entries):
            self._drop(key)
        await self.publisher.close()


class _AckBatch(Protocol):
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> list[int]: ...


async def apply_acknowledgements(
    shares: SharePartitions, cache: TopicCache, group_id: str, member_id: str,
    topic_id: uuid.UUID, partition: int, batches: Sequence[_AckBatch],
) -> tuple[int, str | None, SharePartition | None]:
    """Apply a partition's acknowledgement batches in memory: (error code, message) as
    ShareFetch's acknowledge_error_code / ShareAcknowledge's error_code carry them, and the
    share-partition that `persist_acknowledged` must store before the client is answered (None
    when the partition is not served here)."""
    try:
        _, plog = await cache.log(topic_id, partition)
        sp = await shares.get(group_id, plog)
        assert sp is not None
    except KafkaApiError as e:
        return e.error_code, e.message, None
    code, msg = ErrorCode.NONE, None
    for b in batches:
        try:
            sp.acknowledge(member_id, b.first_offset, b.last_offset, list(b.acknowledge_types))
        except InvalidRecordState as e:
            code, msg = code or ErrorCode.INVALID_RECORD_STATE, msg or str(e)
        except ValueError as e:
            code, msg = code or ErrorCode.INVALID_REQUEST, msg or str(e)
    return code, msg, sp


async def persist_acknowledged(sp: SharePartition, code: int, msg: str | None) -> tuple[int, str | None]:
    """Store what `apply_acknowledgements` changed: its (error code, message), or
    NOT_LEADER_OR_FOLLOWER if the state could not be stored."""
    try:
        await sp.persist()
    except Exception as e:
        log.info("share-partition state: acknowledgement not persisted: %r", e)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, "the partition moved before the acknowledgement was stored"
    return code, msg


async def acknowledge(
    shares: SharePartitions, cache: TopicCache, group_id: str, member_id: str,
    topic_id: uuid.UUID, partition: int, batches: Sequence[_AckBatch],
) -> tuple[int, str | None]:
    """Apply a partition's acknowledgement batches and persist them (see apply_acknowledgements)."""
    code, msg, sp = await apply_acknowledgements(shares, cache, group_id, member_id, topic_id, partition, batches)
    return (code, msg) if sp is None else await persist_acknowledged(sp, code, msg)


def release_session(shares: SharePartitions, session: ShareSession) -> None:
    """A share session closed: the records its member holds return to the others."""
    for plog, sp in shares.of_group(session.group_id):
        if (plog.topic.topic_id, plog.partition) in session.partitions and sp.release_member(session.member_id):
            e = shares.entry_of(session.group_id, plog)
            if e is not None:
                sp_task = asyncio.get_running_loop().create_task(sp.persist())
                sp_task.add_done_callback(retrieve_outcome)
