"""How much of the log a share fetch reads (gateway/handlers/share_fetch.py): growing chunks from
the share-partition's fetch start, never the request's max_bytes (up to 50 MB) at once; which
batches read hold nothing for a consumer (markers, aborted transactions)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coordinator.share.config import ShareConfig
from coordinator.share.partition import AckType, SharePartition
from gateway.handlers import share_fetch
from kafka_wire.records.builder import NewRecord, build_batch
from tests.kafka_log.test_txn import LOG as TXN_LOG
from tests.kafka_log.test_txn import A
from tests.support.clock import FakeClock

PER_BATCH, BATCHES = 10, 400
MAX_BYTES = 50 << 20  # the Java consumer's fetch.max.bytes


class Log:
    """A partition log of BATCHES batches of PER_BATCH 1 KiB records, counting the bytes read."""

    def __init__(self) -> None:
        self.batches = [build_batch([NewRecord(None, bytes(1024))] * PER_BATCH, base_offset=i * PER_BATCH)
                        for i in range(BATCHES)]
        self.high_watermark = self.last_stable_offset = BATCHES * PER_BATCH
        self.log_start_offset = 0
        self.read_bytes = 0
        self.topic = SimpleNamespace(config_int=lambda name: 0, config=lambda name: None)  # no delayed delivery

    async def read(self, offset: int, max_bytes: int, *, min_one: bool) -> list[bytes]:
        out: list[bytes] = []
        size = 0
        for b in self.batches[offset // PER_BATCH:]:
            if size + len(b) > max_bytes and not (min_one and not out):
                break
            out.append(b)
            size += len(b)
        self.read_bytes += size
        return out


def make(limit: int = 2000) -> SharePartition:
    return SharePartition(0, ShareConfig(partition_max_record_locks=limit), clock=FakeClock())


async def test_a_fetch_reads_about_what_it_acquires() -> None:
    log, sp = Log(), make()
    batches, runs, _ = await share_fetch._read_and_acquire(log, sp, "m", 50, MAX_BYTES, True)  # type: ignore[arg-type]
    assert runs == [(0, 49, 1)] and [b for b, _, _ in batches][:5] == [0, 10, 20, 30, 40]
    assert log.read_bytes <= share_fetch.READ_CHUNK < len(b"".join(log.batches))


async def test_the_in_flight_limit_ends_the_reading() -> None:
    log, sp = Log(), make(limit=100)
    _, runs, _ = await share_fetch._read_and_acquire(log, sp, "m", 500, MAX_BYTES, True)  # type: ignore[arg-type]
    assert runs == [(0, 99, 1)]
    assert log.read_bytes <= share_fetch.READ_CHUNK


async def test_records_past_what_others_hold_are_read_in_further_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    log, sp = Log(), make()
    chunk = len(log.batches[0]) * 3  # three batches a chunk, then six, twelve...
    monkeypatch.setattr(share_fetch, "READ_CHUNK", chunk)
    _, held, _ = await share_fetch._read_and_acquire(log, sp, "a", 60, MAX_BYTES, True)  # type: ignore[arg-type]
    assert held == [(0, 29, 1), (30, 59, 1)]  # one run per chunk
    sp.acknowledge("a", 0, 9, [AckType.RELEASE])
    log.read_bytes = 0
    _, runs, _ = await share_fetch._read_and_acquire(log, sp, "b", 30, MAX_BYTES, True)  # type: ignore[arg-type]
    assert runs == [(0, 9, 2), (60, 79, 1)]
    # 3 batches (one released), then 6 of which "a" holds 3: 9 batches read, not 400.
    assert log.read_bytes == 9 * len(log.batches[0])
    # max_bytes still bounds the reading (min_one: unless nothing was taken yet).
    log.read_bytes = 0
    small = len(log.batches[0]) - 1
    assert await share_fetch._read_and_acquire(log, sp, "c", 30, small, False) == ([], [], False)  # type: ignore[arg-type]
    _, runs, _ = await share_fetch._read_and_acquire(log, sp, "c", 10, small, True)  # type: ignore[arg-type]
    assert runs == [(80, 89, 1)] and log.read_bytes == len(log.batches[0])


def test_whole_batches_skip_markers_and_aborted_transactions() -> None:
    # A aborts [0, 3] (marker 3), B commits [1, 4] (marker 4), A commits [5, 7] (marker 7)
    aborted = [(A, 0)]
    found, skip = share_fetch._whole_batches(TXN_LOG, aborted)
    assert [(f, la) for f, la, _ in found] == [(i, i) for i in range(8)]
    assert skip == {0, 2, 3, 4, 7}  # as a read_committed consumer: records at 1, 5 and 6
    assert share_fetch._whole_batches(TXN_LOG, None)[1] == {3, 4, 7}  # read_uncommitted: markers only
    # a read starting inside the aborted transaction (at its marker) keeps A's next transaction
    assert share_fetch._whole_batches(TXN_LOG[2:], aborted)[1] == {2, 3, 4, 7}
    assert share_fetch._whole_batches(TXN_LOG[3:], aborted)[1] == {3, 4, 7}
    # a batch cut off by the read's byte limit ends what was found
    cut = [*TXN_LOG[:5], memoryview(TXN_LOG[5])[:-1], TXN_LOG[6]]
    found, skip = share_fetch._whole_batches(cut, aborted)
    assert [f for f, _, _ in found] == [0, 1, 2, 3, 4] and skip == {0, 2, 3, 4}
    assert share_fetch._whole_batches([memoryview(TXN_LOG[0])[:60]], aborted) == ([], frozenset())
