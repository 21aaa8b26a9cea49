"""How often a ShareFetch stores the share-partition's state (gateway/handlers/share_fetch.py):
once for the acknowledgements it carries and the records it acquires together, before it
answers; the acknowledgements alone when nothing is acquired, before a long poll waits."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.share.config import ShareConfig
from coordinator.share.partition import RecordState, SharePartition, StoredSpan
from gateway.handlers import share_fetch
from gateway.shares import SharePartitions
from kafka_wire.messages.share_fetch import ShareFetchRequest
from tests.gateway.test_share_fetch_reads import Log
from tests.support.clock import FakeClock

F = ShareFetchRequest
TID = uuid.uuid4()
ACCEPT = 1


class GatedStore:
    """Saves wait for `gate`; each one is recorded (SPSO, spans) when it starts."""

    def __init__(self) -> None:
        self.saves: list[tuple[int, list[StoredSpan]]] = []
        self.saved = asyncio.Event()  # a save started
        self.gate = asyncio.Event()
        self.gate.set()

    async def save(self, spso: int, spans: list[StoredSpan]) -> None:
        self.saves.append((spso, spans))
        self.saved.set()
        await self.gate.wait()

    def reset(self) -> None:
        self.saves.clear()
        self.saved.clear()


class Shares(SharePartitions):
    """The real share sessions, over one share-partition of a fake log."""

    def __init__(self, sp: SharePartition) -> None:
        super().__init__(sp.config, meta=None, dead_letters=None)  # type: ignore[arg-type]
        self.sp = sp

    async def get(self, group_id: str, plog: Any, *, create: bool = True) -> SharePartition:
        return self.sp

    async def group_share_config(self, group_id: str) -> ShareConfig:
        return self.sp.config

    async def apply_resets(self, group_id: str, plogs: list[Any]) -> None:
        pass


class Cache:
    """TopicCache over the one fake log."""

    log_: Any = None

    def __init__(self, *_: object) -> None:
        pass

    async def log(self, tid: uuid.UUID, partition: int) -> tuple[None, Any]:
        return None, self.log_


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, GatedStore, Any]:
    log = Log()
    log.add_waiter = log.remove_waiter = lambda fut: None
    log.topic.topic_id, log.partition = TID, 0
    monkeypatch.setattr(Cache, "log_", log)
    monkeypatch.setattr(share_fetch, "TopicCache", Cache)
    store = GatedStore()
    shares = Shares(SharePartition(0, ShareConfig(), store=store, clock=FakeClock()))
    ctx = SimpleNamespace(services=SimpleNamespace(share_partitions=lambda: shares, topics=None, partitions=None))
    return ctx, store, log


def _fetch(epoch: int, acks: list[tuple[int, int]] | None = None, max_wait_ms: int = 0) -> F:
    return F(group_id="g", member_id="m", share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
             max_records=20, batch_size=20, topics=[F.FetchTopic(topic_id=TID, partitions=[F.FetchPartition(
                 partition_index=0, acknowledgement_batches=[
                     F.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=[ACCEPT])
                     for f, la in acks or []])])])


def _acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


async def test_acks_and_acquired_records_are_one_save_before_the_answer(setup: Any) -> None:
    ctx, store, _ = setup
    assert _acquired(await share_fetch.share_fetch(ctx, _fetch(0))) == [(0, 19, 1)]
    store.reset()
    store.gate.clear()
    task = asyncio.create_task(share_fetch.share_fetch(ctx, _fetch(1, [(0, 19)])))
    await store.saved.wait()
    # One save holds both: the acks (SPSO past them) and the new records' delivery counts.
    assert store.saves == [(20, [(20, 39, int(RecordState.AVAILABLE), 1)])]
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()  # no answer before the state is stored
    store.gate.set()
    resp = await task
    assert _acquired(resp) == [(20, 39, 1)] and len(store.saves) == 1
    assert resp.responses[0].partitions[0].acknowledge_error_code == 0


async def test_acks_are_saved_before_a_long_poll_waits(setup: Any) -> None:
    ctx, store, log = setup
    await share_fetch.share_fetch(ctx, _fetch(0))
    log.high_watermark = log.last_stable_offset = 20  # nothing more to acquire: the fetch will wait
    store.reset()
    task = asyncio.create_task(share_fetch.share_fetch(ctx, _fetch(1, [(0, 9)], max_wait_ms=60_000)))
    await store.saved.wait()
    assert store.saves == [(10, [(10, 19, int(RecordState.AVAILABLE), 1)])]
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()  # waiting for records, its acks stored
    task.cancel()
