"""Incremental fetch sessions (KIP-227): the cache's eviction rules in-process, and the session
protocol on the wire against a standalone gateway (full and incremental answers, epochs,
forgotten partitions, closing, the cache limit), plus diverging-epoch answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from gateway.fetch_sessions import CachedPartition, FetchSessionCache, next_epoch
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.fetch import FetchRequest
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.records import iter_batches
from store.net import free_port
from tests.gateway.test_produce_raw import Raw, batch, create_topic, produce_request
from tests.support.gateway import StandaloneFactory, StandaloneGateway
from tests.support.metrics import scrape, value

# -- the cache ---------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _parts(n: int) -> dict[tuple[str | uuid.UUID, int], CachedPartition]:
    return {("t", i): CachedPartition(0, 1024, -1, -1) for i in range(n)}


def test_epochs_wrap_as_kafka() -> None:
    assert [next_epoch(e) for e in (-1, 0, 1, 0x7FFFFFFF)] == [-1, 1, 2, 1]


def test_cache_full_evicts_stale_then_larger_old_sessions() -> None:
    clock = _Clock()
    cache = FetchSessionCache(2, now_ms=clock)
    a = cache.create(_parts(3), privileged=False, topic_ids=False)
    b = cache.create(_parts(5), privileged=False, topic_ids=False)
    assert a and b and len(cache) == 2
    # full, both young: nothing may be evicted, the answer has no session
    assert cache.create(_parts(100), privileged=False, topic_ids=False) == 0
    # two minutes on: both old, but a was used since its creation, b never: neither is stale
    # yet (idle > 2 min is), and evictability is decided when a session is touched
    clock.ms += 60_000
    sa = cache.get(a)
    assert sa is not None
    cache.touch(sa)
    clock.ms += 70_000  # b idle 130 s: stale, evicted first (least recently used)
    c = cache.create(_parts(1), privileged=False, topic_ids=False)
    assert c and cache.get(b) is None and cache.evictions == 1
    # a: touched at 60 s of age (not yet evictable); c young: a 2-partition session cannot get in
    assert cache.create(_parts(2), privileged=False, topic_ids=False) == 0
    clock.ms += 61_000
    cache.touch(sa)  # now old: evictable by a session of at least as many partitions... strictly more
    cc = cache.get(c)
    assert cc is not None
    cache.touch(cc)
    assert cache.create(_parts(3), privileged=False, topic_ids=False) == 0  # same size: kept
    d = cache.create(_parts(4), privileged=False, topic_ids=False)
    assert d and cache.get(a) is None and cache.get(c) is not None


def test_privileged_sessions_evict_consumer_sessions() -> None:
    clock = _Clock()
    cache = FetchSessionCache(1, now_ms=clock)
    consumer = cache.create(_parts(50), privileged=False, topic_ids=True)
    assert consumer
    follower = cache.create(_parts(1), privileged=True, topic_ids=True)
    assert follower and cache.get(consumer) is None
    # a young privileged session is not evictable by consumers, even large ones
    assert cache.create(_parts(500), privileged=False, topic_ids=True) == 0


def test_incremental_checks() -> None:
    cache = FetchSessionCache()
    sid = cache.create(_parts(2), privileged=False, topic_ids=False)
    with pytest.raises(Exception) as e:
        cache.incremental(sid + 1, 1, False)
    assert getattr(e.value, "error_code", None) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    with pytest.raises(Exception) as e:
        cache.incremental(sid, 2, False)
    assert getattr(e.value, "error_code", None) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(Exception) as e:
        cache.incremental(sid, 1, True)
    assert getattr(e.value, "error_code", None) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    s = cache.incremental(sid, 1, False)
    s.update([], [("t", 0), ("t", 1)])
    assert not cache.advance(s) and cache.get(sid) is None  # emptied: closed


# -- on the wire -------------------------------------------------------------------------------


@pytest.fixture
def raw(module_standalone: StandaloneGateway) -> Iterator[Raw]:
    r = Raw(module_standalone.bootstrap)
    yield r
    r.close()


def _fetch(topic: str | uuid.UUID, parts: dict[int, int], *, sid: int = 0, epoch: int = -1,
           forget: list[int] | None = None, last_fetched_epoch: int = -1) -> FetchRequest:
    fps = [FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20,
                                       last_fetched_epoch=last_fetched_epoch) for p, o in parts.items()]
    by_id = isinstance(topic, uuid.UUID)
    topics = [FetchRequest.FetchTopic(topic_id=topic, partitions=fps) if by_id
              else FetchRequest.FetchTopic(topic=topic, partitions=fps)] if fps else []
    forgotten = []
    if forget:
        forgotten = [FetchRequest.ForgottenTopic(topic_id=topic, partitions=forget) if by_id
                     else FetchRequest.ForgottenTopic(topic=topic, partitions=forget)]
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, session_id=sid,
                        session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten)


def _answered(resp: object) -> dict[int, object]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}  # type: ignore[attr-defined]


def _produce(raw: Raw, topic: str, partition: int, n: int = 1) -> None:
    r = raw.call(produce_request(topic, batch(n), partition=partition), 9)
    assert r.responses[0].partition_responses[0].error_code == 0


def test_session_lifecycle_on_the_wire(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "sess", partitions=3)
    _produce(raw, "sess", 0, 2)
    # full fetch asking for a session: every partition answered, a session id given
    resp = raw.call(_fetch("sess", {0: 0, 1: 0, 2: 0}, epoch=0), 12)
    sid = resp.session_id
    assert resp.error_code == 0 and sid != 0
    got = _answered(resp)
    assert sorted(got) == [0, 1, 2] and got[0].high_watermark == 2  # type: ignore[attr-defined]
    # incremental, p0 moved on: nothing changed, so nothing is answered
    resp = raw.call(_fetch("sess", {0: 2}, sid=sid, epoch=1), 12)
    assert (resp.error_code, resp.session_id, _answered(resp)) == (0, sid, {})
    # new data on p1 (not named in the request): only p1 comes back, from the cached offset
    _produce(raw, "sess", 1, 3)
    resp = raw.call(_fetch("sess", {}, sid=sid, epoch=2), 12)
    got = _answered(resp)
    assert list(got) == [1] and got[1].high_watermark == 3  # type: ignore[attr-defined]
    assert [b.base_offset for b in iter_batches(bytes(got[1].records))] == [0]  # type: ignore[attr-defined]
    # a resent epoch is refused
    resp = raw.call(_fetch("sess", {}, sid=sid, epoch=2), 12)
    assert (resp.error_code, _answered(resp)) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, {})
    # errors are always answered (p7 does not exist), news-less partitions are not
    resp = raw.call(_fetch("sess", {1: 3, 7: 0}, sid=sid, epoch=3), 12)
    got = _answered(resp)
    assert list(got) == [7] and got[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[attr-defined]
    resp = raw.call(_fetch("sess", {}, sid=sid, epoch=4), 12)
    assert list(_answered(resp)) == [7]
    # forgotten partitions are no longer fetched: new data on p2 after forgetting it is not sent
    resp = raw.call(_fetch("sess", {}, sid=sid, epoch=5, forget=[2, 7]), 12)
    assert _answered(resp) == {}
    _produce(raw, "sess", 2)
    resp = raw.call(_fetch("sess", {}, sid=sid, epoch=6), 12)
    assert _answered(resp) == {}
    # forgetting the rest closes the session: a sessionless answer, then the id is unknown
    resp = raw.call(_fetch("sess", {}, sid=sid, epoch=7, forget=[0, 1]), 12)
    assert (resp.error_code, resp.session_id) == (0, 0)
    resp = raw.call(_fetch("sess", {}, sid=sid, epoch=8), 12)
    assert (resp.error_code, resp.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)


def test_full_requests_close_sessions_and_versions_must_match(module_standalone: StandaloneGateway,
                                                              raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "sess-ids")
    md = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="sess-ids")]), 12)
    tid = md.topics[0].topic_id
    sid = raw.call(_fetch(tid, {0: 0}, epoch=0), 13).session_id
    assert sid
    # a topic-id session cannot continue with names (v12), nor the other way round
    resp = raw.call(_fetch("sess-ids", {}, sid=sid, epoch=1), 12)
    assert resp.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    resp = raw.call(_fetch(tid, {}, sid=sid, epoch=1), 13)
    assert (resp.error_code, resp.session_id) == (0, sid)
    # a full sessionless request (epoch -1) naming the session closes it and makes none
    resp = raw.call(_fetch(tid, {0: 0}, sid=sid, epoch=-1), 13)
    assert (resp.error_code, resp.session_id, len(_answered(resp))) == (0, 0, 1)
    resp = raw.call(_fetch(tid, {}, sid=sid, epoch=2), 13)
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # unknown topic ids in a session are answered with UNKNOWN_TOPIC_ID every time
    other = uuid.uuid4()
    sid = raw.call(_fetch(other, {0: 0}, epoch=0), 13).session_id
    resp = raw.call(_fetch(other, {}, sid=sid, epoch=1), 13)
    assert [p.error_code for p in _answered(resp).values()] == [ErrorCode.UNKNOWN_TOPIC_ID]  # type: ignore[attr-defined]


def test_diverging_epoch_answered_as_kafka(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "sess-div")
    _produce(raw, "sess-div", 0, 3)
    md = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="sess-div")]), 12)
    epoch = md.topics[0].partitions[0].leader_epoch
    assert epoch >= 0
    # the current epoch, inside the log: read normally
    p = _answered(raw.call(_fetch("sess-div", {0: 1}, last_fetched_epoch=epoch), 12))[0]
    assert p.error_code == 0 and p.diverging_epoch.epoch == -1  # type: ignore[attr-defined]
    assert bytes(p.records)  # type: ignore[attr-defined]
    # a fetcher ahead of the end of its last epoch here: told where the epoch ends, no records
    # (checked before the offset range, as Kafka's Partition.readRecords)
    p = _answered(raw.call(_fetch("sess-div", {0: 5}, last_fetched_epoch=epoch), 12))[0]
    assert p.error_code == 0 and not p.records and p.high_watermark == 3  # type: ignore[attr-defined]
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (epoch, 3)  # type: ignore[attr-defined]
    # an epoch later than any here has no end offset: OFFSET_OUT_OF_RANGE, as Kafka
    p = _answered(raw.call(_fetch("sess-div", {0: 3}, last_fetched_epoch=epoch + 5), 12))[0]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # type: ignore[attr-defined]


def test_cache_limit_from_the_config(standalone_factory: StandaloneFactory) -> None:
    port = free_port()
    gw = standalone_factory(extra_args=["--max-incremental-fetch-session-cache-slots", "1",
                                        "--metrics", f"127.0.0.1:{port}"])
    raw = Raw(gw.bootstrap)
    try:
        create_topic(gw.bootstrap, "sess-limit")
        first = raw.call(_fetch("sess-limit", {0: 0}, epoch=0), 12).session_id
        assert first
        # the cache is full and its one session young: no session for the next full fetch
        resp = raw.call(_fetch("sess-limit", {0: 0}, epoch=0), 12)
        assert (resp.error_code, resp.session_id, len(_answered(resp))) == (0, 0, 1)
        assert raw.call(_fetch("sess-limit", {}, sid=first, epoch=1), 12).session_id == first
        m = scrape(port)
        assert value(m, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 1
        assert value(m, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 1
    finally:
        raw.close()
