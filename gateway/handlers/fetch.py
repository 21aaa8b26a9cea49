"""Fetch (v4-18): stored batches sent as they are (RawResponse, no copy), Kafka's byte limits,
long polling woken by appends, incremental fetch sessions (v7+, gateway/fetch_sessions.py),
diverging-epoch answers to `last_fetched_epoch` (v12+) and current-leader hints (v16+, KIP-951).
read_committed (isolation_level 1) stops at the last stable offset and lists the aborted
transactions of the returned range; both levels report the LSO as Kafka does.

Sessions as Kafka's FetchManager: epoch -1 is sessionless, epoch 0 creates a session (any
session a full request names is closed first), a positive epoch continues the session it names:
the request lists only changed partitions and the answer only partitions with news.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    PartKey,
    SessionError,
    next_epoch,
)
from gateway.handlers.spec import RawResponse
from gateway.metrics import fetch_answered
from gateway.partition.lookup import TopicCache, leader_hint
from kafka_wire.errors import ErrorCode
from kafka_wire.hotpath import FetchPartition, FetchTopic, NodeEndpoint, encode_fetch_response
from kafka_wire.messages.fetch import FetchRequest
from store.tasks import within

if TYPE_CHECKING:
    from gateway.partition.log import PartitionLog
    from gateway.topics.registry import TopicInfo

READ_COMMITTED = 1
_HINTED = (int(ErrorCode.NOT_LEADER_OR_FOLLOWER), int(ErrorCode.FENCED_LEADER_EPOCH))


class _Slot:
    """One partition of this fetch: what to read, its log (or error), and the last read."""

    __slots__ = ("error", "info", "key", "log", "out", "req")

    def __init__(self, key: PartKey, req: CachedPartition) -> None:
        self.key = key
        self.req = req
        self.info: TopicInfo | None = None
        self.log: PartitionLog | None = None
        self.error = 0
        self.out = FetchPartition(key[1])


def _error_partition(index: int, code: int) -> FetchPartition:
    return FetchPartition(index, error_code=code, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1)


async def _resolve(slots: list[_Slot], cache: TopicCache) -> None:
    for s in slots:
        topic, partition = s.key
        try:
            s.info = await cache.get(topic)
            _, s.log = await cache.log(topic, partition)
        except KafkaApiError as e:
            s.error = e.error_code


async def _read_one(s: _Slot, plog: PartitionLog, max_bytes: int, min_one: bool, committed: bool) -> FetchPartition:
    r = s.req
    plog.check_leader_epoch(r.current_leader_epoch)
    index = s.key[1]
    if r.last_fetched_epoch >= 0:
        # As Kafka's Partition.readRecords: a fetcher whose last epoch ended earlier here (or
        # is unknown) is told where it diverged instead of getting records.
        epoch, end = plog.end_offset_for_epoch(r.last_fetched_epoch)
        if epoch < 0 or end < 0:
            raise KafkaApiError(int(ErrorCode.OFFSET_OUT_OF_RANGE),
                                f"no end offset for the last fetched epoch {r.last_fetched_epoch}")
        if epoch < r.last_fetched_epoch or end < r.fetch_offset:
            return FetchPartition(index, high_watermark=plog.high_watermark, last_stable_offset=plog.last_stable_offset,
                                  log_start_offset=plog.log_start_offset, diverging_epoch=(epoch, end))
    limit = min(r.max_bytes, max_bytes)
    aborted: list[tuple[int, int]] | None = None
    if committed:
        recs, aborted = await plog.read_committed(r.fetch_offset, limit, min_one=min_one)
    else:
        recs = await plog.read(r.fetch_offset, limit, min_one=min_one)
    return FetchPartition(index, high_watermark=plog.high_watermark, last_stable_offset=plog.last_stable_offset,
                          log_start_offset=plog.log_start_offset, aborted_transactions=aborted, records=recs)


async def _read_all(slots: list[_Slot], max_bytes: int, committed: bool) -> tuple[int, bool]:
    """One pass over every partition (Kafka's limits); fills each slot's `out`.
    (bytes, answer now: an error or a diverging epoch)."""
    remaining = max_bytes
    min_one = True
    total = 0
    now = False
    for s in slots:
        plog = s.log
        if plog is None:
            s.out = _error_partition(s.key[1], s.error)
            now = True
            continue
        try:
            out = await _read_one(s, plog, max(remaining, 0), min_one, committed)
        except KafkaApiError as e:
            s.out = _error_partition(s.key[1], e.error_code)
            now = True
            continue
        s.out = out
        if out.diverging_epoch is not None:
            now = True
        size = 0
        for b in out.records or ():
            size += len(b)
        if size:
            min_one = False
            remaining -= size
            total += size
    return total, now


def _hint(ctx: RequestContext, slots: list[_Slot]) -> list[NodeEndpoint]:
    """KIP-951 (v16+): NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH partitions carry the
    current leader, and the answer the endpoints of those leaders."""
    nodes: dict[int, NodeEndpoint] = {}
    for s in slots:
        if s.out.error_code in _HINTED and s.info is not None:
            leader, node = leader_hint(ctx.services.cluster, ctx.services.partitions, ctx.services.node_id, s.info.topic_id, s.key[1])
            if leader[0] >= 0:
                s.out.current_leader = leader
            if node is not None:
                nodes[node.node_id] = NodeEndpoint(node.node_id, node.host, node.port, node.rack)
    return list(nodes.values())


def _grouped(slots: list[_Slot]) -> tuple[list[FetchTopic], dict[int, str]]:
    """Response topics as Kafka builds them: consecutive partitions of a topic share an entry."""
    topics: list[FetchTopic] = []
    names: dict[int, str] = {}
    for s in slots:
        topic = s.key[0]
        if not topics or topics[-1].topic != topic:
            topics.append(FetchTopic(topic))
            if s.info is not None:
                names[len(topics) - 1] = s.info.name
        topics[-1].partitions.append(s.out)
    return topics, names


def _sessions(ctx: RequestContext) -> FetchSessionCache | None:
    return getattr(ctx.services, "fetch_sessions", None)


def _requested(req: FetchRequest, topic_ids: bool) -> list[tuple[PartKey, CachedPartition]]:
    out = []
    for t in req.topics:
        key: str | uuid.UUID = t.topic_id if topic_ids else t.topic
        for p in t.partitions:
            out.append(((key, p.partition), CachedPartition(
                p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch, p.last_fetched_epoch)))
    return out


async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> RawResponse:
    version = ctx.api_version
    topic_ids = version >= 13
    sessions = _sessions(ctx)
    requested = _requested(req, topic_ids)
    session: FetchSession | None = None
    full = req.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)
    if full:
        if req.session_id and sessions is not None:
            sessions.remove(req.session_id)
        wanted = requested
    else:
        try:
            if sessions is None:
                raise SessionError(int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
            session = sessions.incremental(req.session_id, req.session_epoch, topic_ids)
        except SessionError as e:
            return RawResponse(encode_fetch_response(version, [], error_code=e.error_code))
        session.update(requested, [(f.topic_id if topic_ids else f.topic, p)
                                   for f in req.forgotten_topics_data for p in f.partitions])
        if sessions.advance(session):
            wanted = list(session.partitions.items())
        else:
            session, wanted = None, requested  # nothing left: closed, answered sessionless
    slots = [_Slot(k, p) for k, p in wanted]
    await _resolve(slots, TopicCache(ctx.services.topics, ctx.services.partitions))
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    committed = req.isolation_level == READ_COMMITTED
    total, now = await _read_all(slots, max_bytes, committed)
    logs = [s.log for s in slots if s.log is not None]
    ctx.effects_applied(durability_pending=False)  # a long poll must not hold up the connection
    while total < req.min_bytes and not now and logs:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for plog in logs:
            plog.add_waiter(woken)
        try:
            await within(asyncio.shield(woken), remaining)
        except TimeoutError:
            break
        finally:
            for plog in logs:
                plog.remove_waiter(woken)
        total, now = await _read_all(slots, max_bytes, committed)
    nodes = _hint(ctx, slots) if version >= 16 else []
    session_id = 0
    if session is not None:
        assert sessions is not None
        if session.epoch != next_epoch(req.session_epoch):
            # another request of this session was answered meanwhile (a resend)
            return RawResponse(encode_fetch_response(version, [], error_code=int(ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                                                     session_id=session.id, node_endpoints=nodes))
        session_id = session.id
        slots = _news(session, slots)
    elif full and req.session_epoch == INITIAL_EPOCH and sessions is not None:
        session_id = sessions.create(_cached(slots), privileged=_from_follower(req), topic_ids=topic_ids)
    topics, names = _grouped(slots)
    fetch_answered(topics, names)
    return RawResponse(encode_fetch_response(version, topics, session_id=session_id, node_endpoints=nodes))


def _from_follower(req: FetchRequest) -> bool:
    return req.replica_id >= 0 or req.replica_state.replica_id >= 0


def _cached(slots: list[_Slot]) -> dict[PartKey, CachedPartition]:
    out = {}
    for s in slots:
        c = s.req
        c.high_watermark, c.log_start_offset = s.out.high_watermark, s.out.log_start_offset
        out[s.key] = c
    return out


def _news(session: FetchSession, slots: list[_Slot]) -> list[_Slot]:
    """The partitions an incremental answer carries (Kafka's IncrementalFetchContext); those
    that returned records go to the end of the session's order."""
    out = []
    for s in slots:
        cached = session.partitions.get(s.key)
        if cached is None:
            continue
        o = s.out
        has_records = bool(o.records) and any(len(b) for b in o.records or ())
        if cached.must_respond(has_records, o.error_code, o.high_watermark, o.log_start_offset,
                               o.diverging_epoch is not None):
            out.append(s)
            if has_records:
                session.moved_to_end(s.key)
    return out
