"""One share-partition's delivery state (coordinator/share/partition.py) on a fake clock:
acquisition of whole batches, locks expiring back to AVAILABLE with the count kept, the
delivery limit archiving, every acknowledge type, Kafka's INVALID_RECORD_STATE cases, the SPSO
moving, and the stored form (ranges, not records) a takeover restores from."""

from __future__ import annotations

import pytest

from coordinator.share.config import ShareConfig, by_duration_ms
from coordinator.share.partition import (
    AckType,
    InvalidRecordState,
    RecordState,
    SharePartition,
    StoredSpan,
    decode_spans,
    encode_spans,
)
from tests.support.clock import FakeClock

ACCEPT, RELEASE, REJECT, RENEW, GAP = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW, AckType.GAP
CFG = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=3, partition_max_record_locks=100)


class Store:
    def __init__(self) -> None:
        self.saved: list[tuple[int, list[StoredSpan]]] = []

    async def save(self, spso: int, spans: list[StoredSpan]) -> None:
        self.saved.append((spso, spans))


def make(clock: FakeClock, spso: int = 0, **kw: object) -> tuple[SharePartition, list[int]]:
    woken: list[int] = []
    sp = SharePartition(spso, CFG, clock=clock, on_available=lambda: woken.append(1), **kw)  # type: ignore[arg-type]
    return sp, woken


async def test_batches_are_acquired_whole_and_each_once() -> None:
    clock = FakeClock()
    sp, _ = make(clock)
    assert sp.acquire("a", [(0, 9), (10, 19)], max_records=5) == [(0, 9, 1)]  # a whole batch past the limit
    assert sp.acquire("b", [(0, 9), (10, 19), (20, 24)], max_records=100) == [(10, 24, 1)]
    assert sp.acquire("c", [(0, 9), (10, 24)], max_records=100) == []
    assert (sp.spso, sp.end, sp.in_flight()) == (0, 25, 25)


async def test_expired_locks_return_records_with_their_count_and_the_limit_archives() -> None:
    clock = FakeClock()
    sp, woken = make(clock)
    for n in range(1, CFG.delivery_count_limit + 1):
        assert sp.acquire("a", [(0, 4)], 10) == [(0, 4, n)]
        await clock.advance(0.999)
        assert sp.acquire("b", [(0, 4)], 10) == []  # still locked
        await clock.advance(0.002)
        assert len(woken) == n
    # The limit reached: archived, and the SPSO moves past them.
    assert sp.acquire("b", [(0, 4)], 10) == []
    assert (sp.spso, sp.spans()) == (5, [])


async def test_acknowledge_types() -> None:
    clock = FakeClock()
    sp, _ = make(clock)
    sp.acquire("a", [(0, 9)], 10)
    sp.acknowledge("a", 0, 2, [ACCEPT])
    assert sp.spso == 3
    sp.acknowledge("a", 3, 6, [RELEASE, REJECT, GAP, ACCEPT])
    assert sp.spso == 3  # 3 was released: available again
    assert [(s.first, s.last, s.state) for s in sp.spans()] == [
        (3, 3, RecordState.AVAILABLE), (4, 5, RecordState.ARCHIVED), (6, 6, RecordState.ACKNOWLEDGED),
        (7, 9, RecordState.ACQUIRED)]
    assert sp.fetch_start() == 3
    assert sp.acquire("b", [(0, 9)], 10) == [(3, 3, 2)]
    # Renewal restarts the lock of what it names, only.
    await clock.advance(0.6)
    sp.acknowledge("a", 7, 8, [RENEW])
    await clock.advance(0.6)
    assert [(s.first, s.last, s.state) for s in sp.spans() if s.first >= 7] == [
        (7, 8, RecordState.ACQUIRED), (9, 9, RecordState.AVAILABLE)]
    sp.acknowledge("a", 7, 8, [ACCEPT])
    await clock.advance(1)
    # b's lock on 3 expired too: available again with its two deliveries.
    assert [(s.first, s.last, s.state, s.count) for s in sp.spans()] == [
        (3, 3, RecordState.AVAILABLE, 2), (4, 5, RecordState.ARCHIVED, 1), (6, 8, RecordState.ACKNOWLEDGED, 1),
        (9, 9, RecordState.AVAILABLE, 1)]


async def test_renew_refused_when_the_group_turned_it_off() -> None:
    """share.renew.acknowledge.enable=false: a RENEW is INVALID_RECORD_STATE with Kafka's message,
    and the records stay held by the member as they were."""
    clock = FakeClock()
    sp = SharePartition(0, ShareConfig(record_lock_duration_ms=1000, renew_acknowledge_enable=False), clock=clock)
    sp.acquire("a", [(0, 4)], 10)
    with pytest.raises(InvalidRecordState, match=r"^Renewing acquisition locks is not enabled for the group\.$"):
        sp.acknowledge("a", 0, 4, [ACCEPT, ACCEPT, RENEW, ACCEPT, ACCEPT])
    assert [(s.first, s.last, s.state, s.member) for s in sp.spans()] == [(0, 4, RecordState.ACQUIRED, "a")]
    sp.acknowledge("a", 0, 4, [ACCEPT])
    assert sp.spso == 5


async def test_invalid_record_state_changes_nothing() -> None:
    clock = FakeClock()
    sp, _ = make(clock)
    sp.acquire("a", [(0, 4)], 10)
    sp.acquire("b", [(5, 9)], 10)
    before = [(s.first, s.last, s.state, s.member) for s in sp.spans()]
    for member, first, last in (("a", 3, 6), ("b", 0, 0), ("a", 10, 12)):
        with pytest.raises(InvalidRecordState):
            sp.acknowledge(member, first, last, [ACCEPT])
    with pytest.raises(ValueError):
        sp.acknowledge("a", 0, 4, [ACCEPT, ACCEPT])  # neither one type nor one per offset
    with pytest.raises(ValueError):
        sp.acknowledge("a", 0, 0, [9])
    assert [(s.first, s.last, s.state, s.member) for s in sp.spans()] == before
    sp.acknowledge("a", 0, 4, [ACCEPT])
    sp.acknowledge("a", 0, 4, [ACCEPT])  # twice: before the SPSO now, finished, no error (as Kafka)
    with pytest.raises(InvalidRecordState):  # but from the SPSO on, it must be held
        sp.acknowledge("a", 3, 6, [ACCEPT])
    sp.acknowledge("b", 3, 9, [RELEASE] * 2 + [ACCEPT] * 5)  # per-offset types, the finished ones dropped
    assert (sp.spso, sp.spans()) == (10, [])
    assert sp.end == 10


async def test_a_member_leaving_releases_what_it_holds() -> None:
    clock = FakeClock()
    sp, woken = make(clock)
    sp.acquire("a", [(0, 4)], 10)
    sp.acquire("b", [(5, 9)], 10)
    assert sp.release_member("a") and woken
    assert not sp.release_member("a")
    assert sp.acquire("c", [(0, 4), (5, 9)], 10) == [(0, 4, 2)]


async def test_in_flight_limit() -> None:
    clock = FakeClock()
    sp, _ = make(clock)
    assert sp.acquire("a", [(0, 59), (60, 119), (120, 129)], 1000) == [(0, 119, 1)]
    assert sp.acquire("a", [(120, 129)], 1000) == []
    sp.acknowledge("a", 0, 59, [ACCEPT])
    assert sp.acquire("a", [(120, 129)], 1000) == [(120, 129, 1)]


async def test_stored_state_follows_ranges_and_restores() -> None:
    clock = FakeClock()
    store = Store()
    sp, _ = make(clock, store=store)
    batches = [(i * 10, i * 10 + 9) for i in range(10)]
    sp.acquire("a", batches, 1000)
    # Accept every other batch: the stored form is one item per run, not per record.
    for f, la in batches[::2]:
        sp.acknowledge("a", f, la, [ACCEPT])
    await sp.persist()
    spso, spans = store.saved[-1]
    assert spso == 10
    assert len(spans) == 9 and spans[0] == (10, 19, RecordState.AVAILABLE, 1)
    assert decode_spans(encode_spans(spans)) == spans
    # A takeover: acknowledged records stay done, the others come back with their count.
    again = SharePartition(spso, CFG, clock=clock, stored=spans)
    got = again.acquire("b", batches, 1000)
    assert got == [(f, la, 2) for f, la in batches[1::2]]
    assert again.end == 100


async def test_restore_fills_never_delivered_gaps_and_skips_deleted_records() -> None:
    clock = FakeClock()
    sp = SharePartition(0, CFG, clock=clock, stored=[(5, 9, int(RecordState.ARCHIVED), 3), (12, 12, 0, 1)])
    assert sp.acquire("a", [(0, 14)], 100) == [(0, 4, 1), (10, 11, 1), (12, 12, 2), (13, 14, 1)]
    sp.skip_to(13)
    assert sp.spso == 13 and sp.spans()[0].first == 13


async def test_control_batches_are_archived_not_delivered() -> None:
    clock = FakeClock()
    sp, _ = make(clock)
    got = sp.acquire("a", [(0, 4), (5, 5), (6, 9)], 100, skip=frozenset({5}))
    assert got == [(0, 4, 1), (6, 9, 1)]
    sp.acknowledge("a", 0, 4, [ACCEPT])
    assert sp.spso == 6  # the marker does not hold the start back
    assert sp.acquire("b", [(10, 10)], 100, skip=frozenset({10})) == []
    sp.acknowledge("a", 6, 9, [ACCEPT])
    assert (sp.spso, sp.end, sp.spans()) == (11, 11, [])


BACKOFF = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=5, partition_max_record_locks=100,
                      redelivery_backoff_min_ms=100, redelivery_backoff_max_ms=300, redelivery_backoff_multiplier=2.0)


def test_backoff_schedule_grows_with_the_delivery_count_up_to_the_cap() -> None:
    assert [BACKOFF.redelivery_delay_ms(n) for n in range(1, 6)] == [100, 200, 300, 300, 300]
    assert ShareConfig().redelivery_delay_ms(3) == 0  # off by default: Kafka's behaviour


async def test_released_record_backs_off_without_blocking_later_records() -> None:
    clock = FakeClock()
    woken: list[int] = []
    sp = SharePartition(0, BACKOFF, clock=clock, on_available=lambda: woken.append(1))
    batches = [(0, 0), (1, 4)]
    assert sp.acquire("a", batches, 10) == [(0, 4, 1)]
    sp.acknowledge("a", 0, 0, [RELEASE])  # the poison record
    sp.acknowledge("a", 1, 4, [ACCEPT])
    # Backing off: not acquirable, not where a fetch starts, and records after it flow.
    assert sp.fetch_start() == 5 and not sp.has_available(5) and sp.has_available(7)
    assert sp.acquire("b", [*batches, (5, 6)], 10) == [(5, 6, 1)]
    for n, delay in ((2, 0.1), (3, 0.2), (4, 0.3)):
        before = len(woken)
        await clock.advance(delay - 0.001)
        assert sp.acquire("b", batches, 10) == [] and len(woken) == before
        await clock.advance(0.001)
        assert len(woken) == before + 1  # the backoff's end wakes fetchers
        assert sp.fetch_start() == 0
        assert sp.acquire("b", batches, 10) == [(0, 0, n)]
        if n < 4:
            sp.acknowledge("b", 0, 0, [RELEASE])
    # A lock expiry backs off too (count 4: the cap).
    await clock.advance(1.0)
    assert sp.acquire("c", batches, 10) == []
    await clock.advance(0.3)
    assert sp.acquire("c", batches, 10) == [(0, 0, 5)]
    sp.acknowledge("c", 0, 0, [RELEASE])  # the limit: archived, no backoff
    assert sp.spso == 5


async def test_a_leaving_member_s_records_return_without_backoff() -> None:
    clock = FakeClock()
    sp = SharePartition(0, BACKOFF, clock=clock)
    sp.acquire("a", [(0, 4)], 10)
    sp.release_member("a")
    assert sp.acquire("b", [(0, 4)], 10) == [(0, 4, 2)]
    sp.close()


async def test_delayed_records_wait_without_blocking_later_ones() -> None:
    clock = FakeClock()
    woken: list[int] = []
    sp = SharePartition(0, CFG, clock=clock, on_available=lambda: woken.append(1))
    now_ms = int(clock.time() * 1000)
    asked: list[int] = []

    def due(base: int) -> list[tuple[int, int, int]]:
        asked.append(base)
        # batch 0-4: offset 1 due in 5 s, 3-4 in 2 s; batch 5-9: on time
        return [(1, 1, now_ms + 5000), (3, 4, now_ms + 2000)] if base == 0 else [(5, 9, now_ms - 1)]

    batches = [(0, 4), (5, 9)]
    assert sp.acquire("a", batches, 100, due=due) == [(0, 0, 1), (2, 2, 1), (5, 9, 1)]
    assert asked == [0, 5]
    sp.acknowledge("a", 0, 0, [ACCEPT])
    sp.acknowledge("a", 2, 2, [ACCEPT])
    sp.acknowledge("a", 5, 9, [ACCEPT])
    assert (sp.spso, sp.fetch_start(), sp.has_available(10)) == (1, 10, False)
    # Known delayed: the batch is not looked at again until they are due.
    assert sp.acquire("b", batches, 100, due=due) == [] and asked == [0, 5]
    await clock.advance(1.999)
    assert not woken
    await clock.advance(0.001)
    assert woken and sp.fetch_start() == 3
    assert sp.acquire("b", batches, 100, due=due) == [(3, 4, 1)]
    sp.acknowledge("b", 3, 4, [ACCEPT])
    await clock.advance(3.0)
    assert sp.acquire("c", batches, 100, due=due) == [(1, 1, 1)]
    assert asked == [0, 5]
    sp.acknowledge("c", 1, 1, [ACCEPT])
    assert sp.spso == 10
    sp.close()


async def test_delayed_records_stay_outside_the_in_flight_window() -> None:
    clock = FakeClock()
    cfg = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=3, partition_max_record_locks=10)
    sp = SharePartition(0, cfg, clock=clock)
    later = int(clock.time() * 1000) + 60000
    batches = [(0, 9), (10, 19)]
    got = sp.acquire("a", batches, 100, due=lambda base: [(0, 9, later)] if base == 0 else [])
    assert got == [(10, 19, 1)]  # 10 delayed records do not fill the 10-record window
    sp.close()


async def test_a_takeover_checks_restored_never_delivered_records_again() -> None:
    clock = FakeClock()
    later = int(clock.time() * 1000) + 60000
    # Stored: offset 5 delivered once; 0-4 never delivered (not stored), one of them delayed.
    sp = SharePartition(0, CFG, clock=clock, stored=[(5, 5, 0, 1)])
    got = sp.acquire("a", [(0, 4), (5, 5)], 100, due=lambda base: [(2, 2, later)] if base == 0 else [])
    assert got == [(0, 1, 1), (3, 4, 1), (5, 5, 2)]
    sp.close()


@pytest.mark.parametrize(("value", "ms"), [
    ("by_duration:PT1H", 3_600_000), ("BY_DURATION:p1dt2h3m4.5s", 93_784_500), ("by_duration:PT0.25S", 250),
    ("by_duration:P0D", 0), ("earliest", None), ("latest", None),
])
def test_by_duration_reset_is_java_s_duration(value: str, ms: int | None) -> None:
    assert by_duration_ms(value) == ms


@pytest.mark.parametrize("value", ["by_duration:", "by_duration:PT", "by_duration:1h", "by_duration:-PT1S"])
def test_bad_by_duration_resets(value: str) -> None:
    with pytest.raises(ValueError, match="by_duration"):
        by_duration_ms(value)
