"""Dead-letter topics of share groups (coordinator/share/dead_letters.py) on a fake clock: what
goes ARCHIVING and why, the dead-letter records' headers (Kafka 4.4's names), copies, and the
crash window between the dead-letter append and the archive: dead-lettered again, never lost."""

from __future__ import annotations

import dataclasses

import pytest

from coordinator.share.config import ShareConfig
from coordinator.share.dead_letters import (
    H_DELIVERY_COUNT,
    H_GROUP,
    H_MESSAGE,
    H_OFFSET,
    H_PARTITION,
    H_TOPIC,
    SourceRecord,
    drain,
)
from coordinator.share.partition import (
    DELIVERY_COUNT_EXCEEDED,
    REJECTED,
    AckType,
    RecordState,
    SharePartition,
    StoredSpan,
)
from kafka_wire.records.batch import iter_batches
from tests.support.clock import FakeClock

CFG = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=2, partition_max_record_locks=100,
                  dlq_topic="dlq.t")
LOG = {o: SourceRecord(o, 1000 + o, f"k{o}".encode(), f"v{o}".encode(), (("h", b"x"),)) for o in range(10)}


class Store:
    def __init__(self) -> None:
        self.saved: list[tuple[int, list[StoredSpan]]] = []
        self.fail = False

    async def save(self, spso: int, spans: list[StoredSpan]) -> None:
        if self.fail:
            raise ConnectionError("the owner died")  # injected: the archive is never stored
        self.saved.append((spso, spans))


async def read(first: int, last: int) -> list[SourceRecord]:
    return [LOG[o] for o in range(first, last + 1) if o in LOG]


class Dlq:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None, dict[str, bytes | None]]] = []

    async def append(self, batch: bytes) -> None:
        for b in iter_batches(batch):
            b.validate()
            self.records.extend((r.key, r.value, dict(r.headers)) for r in b.records())

    def offsets(self) -> list[int]:
        return [int(h[H_OFFSET] or b"") for _, _, h in self.records]


async def test_rejected_and_limit_records_are_dead_lettered_then_archived() -> None:
    clock, store, dlq = FakeClock(), Store(), Dlq()
    sp = SharePartition(0, CFG, store=store, clock=clock)
    sp.acquire("a", [(0, 4)], 10)
    sp.acknowledge("a", 0, 4, [AckType.ACCEPT, AckType.REJECT, AckType.RELEASE, AckType.ACCEPT, AckType.ACCEPT])
    assert sp.dead_letters() == [(1, 1, 1, REJECTED)]
    assert sp.spso == 1  # not past an ARCHIVING record: it is not finished yet
    sp.acquire("a", [(0, 4)], 10)
    await clock.advance(1.0)  # the lock of offset 2 expires at the limit (2 deliveries)
    assert sp.dead_letters() == [(1, 1, 1, REJECTED), (2, 2, 2, DELIVERY_COUNT_EXCEEDED)]
    assert await drain(sp, "g", "t", 3, read, dlq.append) == 2
    assert (sp.spso, sp.dead_letters(), sp.spans()) == (5, [], [])
    assert store.saved[-1] == (5, [])
    (k1, v1, h1), (_, _, h2) = dlq.records
    assert (k1, v1) == (None, None)  # copy.record.enable=false: the context headers only
    assert h1 == {H_GROUP: b"g", H_TOPIC: b"t", H_PARTITION: b"3", H_OFFSET: b"1", H_DELIVERY_COUNT: b"1",
                  H_MESSAGE: REJECTED.encode()}
    assert (h2[H_OFFSET], h2[H_DELIVERY_COUNT], h2[H_MESSAGE]) == (b"2", b"2", DELIVERY_COUNT_EXCEEDED.encode())


async def test_copies_keep_key_value_and_headers() -> None:
    clock, dlq = FakeClock(), Dlq()
    sp = SharePartition(0, dataclasses.replace(CFG, dlq_copy_record=True), store=Store(), clock=clock)
    sp.acquire("a", [(0, 9)], 10)
    sp.acknowledge("a", 0, 9, [AckType.REJECT])
    assert await drain(sp, "g", "t", 0, read, dlq.append) == 10
    k, v, h = dlq.records[7]
    assert (k, v, h["h"], h[H_OFFSET]) == (b"k7", b"v7", b"x", b"7")
    assert sp.spso == 10


async def test_without_a_dead_letter_topic_nothing_waits() -> None:
    sp = SharePartition(0, dataclasses.replace(CFG, dlq_topic=""), clock=FakeClock())
    sp.acquire("a", [(0, 4)], 10)
    sp.acknowledge("a", 0, 4, [AckType.REJECT])
    assert (sp.spso, sp.dead_letters()) == (5, [])


async def test_a_crash_between_append_and_archive_dead_letters_again_never_loses() -> None:
    clock, store, dlq = FakeClock(), Store(), Dlq()
    sp = SharePartition(0, CFG, store=store, clock=clock)
    sp.acquire("a", [(0, 2), (3, 5)], 10)
    sp.acknowledge("a", 0, 5, [AckType.REJECT])
    await sp.persist()  # what the acknowledgement's answer waited for
    assert store.saved[-1] == (0, [(0, 5, int(RecordState.ARCHIVING), 1)])
    store.fail = True  # the owner dies once the dead-letter append is durable, before the archive is
    with pytest.raises(ConnectionError):
        await drain(sp, "g", "t", 0, read, dlq.append)
    assert dlq.offsets() == [0, 1, 2, 3, 4, 5]
    sp.close()
    # The next owner restores the stored state: still ARCHIVING, so it dead-letters them again.
    spso, stored = store.saved[-1]
    store.fail = False
    sp2 = SharePartition(spso, CFG, store=store, clock=clock, stored=stored)
    assert sp2.dead_letters() == [(0, 5, 1, REJECTED)]
    assert sp2.acquire("b", [(0, 2), (3, 5)], 10) == []  # never delivered again
    assert await drain(sp2, "g", "t", 0, read, dlq.append) == 6
    assert dlq.offsets() == [0, 1, 2, 3, 4, 5] * 2  # twice at most, none lost
    assert store.saved[-1] == (6, [])


async def test_a_failed_append_archives_nothing() -> None:
    clock, store = FakeClock(), Store()
    sp = SharePartition(0, CFG, store=store, clock=clock)
    sp.acquire("a", [(0, 1)], 10)
    sp.acknowledge("a", 0, 1, [AckType.REJECT])

    async def broken(batch: bytes) -> None:
        raise ConnectionError("the dead-letter partition's owner is gone")

    with pytest.raises(ConnectionError):
        await drain(sp, "g", "t", 0, read, broken)
    assert sp.dead_letters() == [(0, 1, 1, REJECTED)] and sp.spso == 0
