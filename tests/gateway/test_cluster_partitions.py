"""PartitionManager ownership over the real metadata stores, with several gateways in one
process (each its own metadata session). The partition log is a recording stand-in: what is
tested here is who opens, closes and hands over which partition, and the leases."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from gateway import paths
from gateway.cluster import leases
from gateway.cluster.membership import ClusterView, GatewayNode
from gateway.cluster.partitions import PartitionManager
from gateway.errors import KafkaApiError
from gateway.topics.registry import TopicInfo, TopicRegistry
from kafka_wire.errors import ErrorCode
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.support.wait import eventually


@dataclass
class FakeLog:
    node_id: int
    topic: TopicInfo
    partition: int
    leader_epoch: int
    closed: bool = False
    deleted: bool = False
    lost_listeners: list[Callable[[], None]] = field(default_factory=list)

    def add_lost_listener(self, cb: Callable[[], None]) -> None:
        self.lost_listeners.append(cb)

    async def close(self) -> None:
        self.closed = True

    async def delete(self) -> None:
        self.deleted = True


class Opens:
    """Records every open; epochs increase per partition across gateways (as fencing would)."""

    def __init__(self) -> None:
        self.logs: list[FakeLog] = []
        self.epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.fail: set[int] = set()
        self.hold: asyncio.Event | None = None  # while set, opens wait for it (bookies not answering)

    def opener(self, node_id: int) -> Callable[..., Awaitable[FakeLog]]:
        async def open_log(
            meta: MetaStore, ledgers: object, topic: TopicInfo, partition: int, **_: object
        ) -> FakeLog:
            await asyncio.sleep(0)
            if self.hold is not None:
                await self.hold.wait()
            if partition in self.fail:
                raise RuntimeError("bookies unavailable")
            key = (topic.topic_id, partition)
            self.epochs[key] = self.epochs.get(key, -1) + 1
            log = FakeLog(node_id, topic, partition, self.epochs[key])
            self.logs.append(log)
            return log

        return open_log

    def open_on(self, node_id: int) -> list[FakeLog]:
        return [g for g in self.logs if g.node_id == node_id and not g.closed and not g.deleted]


@dataclass
class Gateway:
    node_id: int
    meta: MetaStore
    topics: TopicRegistry
    cluster: ClusterView
    partitions: PartitionManager

    async def stop(self) -> None:
        await self.partitions.close()
        await self.cluster.close()
        await self.topics.close()
        await self.meta.close()

    async def die(self) -> None:
        """Session ends without releasing anything (the leases vanish with it)."""
        await self.topics.close()
        await self.meta.close()

    def owned(self, topic: TopicInfo) -> list[int]:
        return sorted(p for tid, p in self.partitions.owned() if tid == topic.topic_id)


StartGateway = Callable[[int], Awaitable[Gateway]]


@pytest.fixture
def opens() -> Opens:
    return Opens()


@pytest.fixture
async def start_gateway(meta_url: str, opens: Opens) -> AsyncIterator[StartGateway]:
    started: list[Gateway] = []

    async def start(node_id: int) -> Gateway:
        meta = open_meta(meta_url, session_timeout=3.0)
        await meta.start()
        topics = TopicRegistry(meta)
        await topics.start()
        cluster = ClusterView(meta, GatewayNode(node_id, "127.0.0.1", 9000 + node_id), topics)
        await cluster.start()
        pm = PartitionManager(meta, object(), topics, cluster, node_id, opener=opens.opener(node_id))  # type: ignore[arg-type]
        await pm.start()
        gw = Gateway(node_id, meta, topics, cluster, pm)
        started.append(gw)
        return gw

    yield start
    if opens.hold is not None:
        opens.hold.set()  # a failed test must not leave the opens it held hanging its teardown
    for gw in reversed(started):
        try:
            await gw.stop()
        except Exception:
            pass


async def test_ownership_spreads_evenly_and_views_agree(start_gateway: StartGateway, opens: Opens) -> None:
    a, b = await start_gateway(1), await start_gateway(2)
    await eventually(lambda: len(a.cluster.gateways()) == 2 and len(b.cluster.gateways()) == 2)
    topic = await a.topics.create("orders", 6, {})
    await eventually(lambda: len(a.owned(topic)) == 3 and len(b.owned(topic)) == 3)
    assert set(a.owned(topic)).isdisjoint(b.owned(topic))
    await eventually(
        lambda: all(
            view.leader_of(topic.topic_id, p) == (1 if p in a.owned(topic) else 2)
            for view in (a.cluster, b.cluster)
            for p in range(6)
        )
    )
    for p in range(6):
        assert await leases.lease_holder(a.meta, topic.topic_id, p) == (1 if p in a.owned(topic) else 2)
    # Each owner publishes its leader epoch in the lease: every gateway can answer Metadata.
    await eventually(
        lambda: all(
            view.leader_epoch_of(topic.topic_id, p) == 0 for view in (a.cluster, b.cluster) for p in range(6)
        )
    )
    assert a.cluster.leader_epoch_of(topic.topic_id, 6) == -1

    # The owner serves; the other one says NOT_LEADER_OR_FOLLOWER; bad partitions are unknown.
    p_a, p_b = a.owned(topic)[0], b.owned(topic)[0]
    log = await a.partitions.get(topic, p_a)
    assert isinstance(log, FakeLog) and log.node_id == 1 and log.partition == p_a
    with pytest.raises(KafkaApiError) as e:
        await a.partitions.get(topic, p_b)
    assert e.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    for bad in (-1, 6):
        with pytest.raises(KafkaApiError) as e:
            await a.partitions.get(topic, bad)
        assert e.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(opens.logs) == 6  # each partition opened exactly once


async def test_first_request_acquires_without_retry(start_gateway: StartGateway, opens: Opens) -> None:
    a, b = await start_gateway(1), await start_gateway(2)
    await eventually(lambda: len(a.cluster.gateways()) == 2 and len(b.cluster.gateways()) == 2)
    # A topic this gateway has not heard of through watches yet (as when auto-created by a
    # request): asking for its partitions answers at once, from either side.
    info = await a.topics.create("fresh", 4, {})
    results = await asyncio.gather(
        *(gw.partitions.get(info, p) for gw in (a, b) for p in range(4)), return_exceptions=True
    )
    served = [r for r in results if isinstance(r, FakeLog)]
    refused = [r for r in results if isinstance(r, KafkaApiError)]
    assert len(served) == 4 and len(refused) == 4
    assert all(r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER for r in refused)
    assert sorted(r.partition for r in served) == [0, 1, 2, 3]
    # Concurrent gets of one partition open it once.
    await eventually(lambda: len(a.owned(info)) + len(b.owned(info)) == 4)
    assert len([g for g in opens.logs if g.topic.topic_id == info.topic_id]) == 4


async def test_a_topic_the_cache_has_not_seen_is_not_deleted(start_gateway: StartGateway, opens: Opens) -> None:
    a, b = await start_gateway(1), await start_gateway(2)
    await eventually(lambda: len(a.cluster.gateways()) == 2 and len(b.cluster.gateways()) == 2)
    info = await a.topics.create("fresh", 4, {})
    served = [g for g in await asyncio.gather(*(b.partitions.get(info, p) for p in range(4)), return_exceptions=True)
              if isinstance(g, FakeLog)]
    assert served
    # b's topic cache has not caught up with the new topic (its watch is late): a pass now
    # must neither delete nor hand over what b serves.
    b.topics._drop("fresh")
    await b.partitions.reconcile()
    assert all(not g.deleted and not g.closed for g in served)
    assert sorted(g.partition for g in served) == b.owned(info)


async def test_rebalance_on_join_and_failover_on_death(start_gateway: StartGateway, opens: Opens) -> None:
    a = await start_gateway(1)
    topic = await a.topics.create("events", 6, {})
    await eventually(lambda: len(a.owned(topic)) == 6)
    first = opens.open_on(1)

    b = await start_gateway(2)
    await eventually(lambda: len(a.owned(topic)) == 3 and len(b.owned(topic)) == 3)
    handed = [g for g in first if g.closed]
    assert sorted(g.partition for g in handed) == b.owned(topic)
    assert all(not g.deleted for g in handed)
    moved = {(g.partition, g.leader_epoch) for g in opens.open_on(2)}
    assert {p for p, _ in moved} == set(b.owned(topic))
    assert all(epoch == 1 for _, epoch in moved)  # a new owner bumps the epoch

    await eventually(lambda: all(a.cluster.leader_epoch_of(topic.topic_id, p) == 1 for p in b.owned(topic)))

    # b dies: its leases go with its session, a takes everything back with new epochs.
    await b.die()
    await eventually(lambda: len(a.owned(topic)) == 6)
    await eventually(lambda: all(a.cluster.leader_of(topic.topic_id, p) == 1 for p in range(6)))
    for p in b.owned(topic):
        log = await a.partitions.get(topic, p)
        assert log.leader_epoch == 2
    # The lease names the owner at once; the epoch it publishes follows once the partition is open.
    await eventually(lambda: all(a.cluster.leader_epoch_of(topic.topic_id, p) == 2 for p in b.owned(topic)))


async def test_lost_ownership_is_dropped_and_reacquired(start_gateway: StartGateway, opens: Opens) -> None:
    a = await start_gateway(1)
    topic = await a.topics.create("fenced", 1, {})
    log = await a.partitions.get(topic, 0)
    assert isinstance(log, FakeLog)
    for cb in log.lost_listeners:
        cb()
    await eventually(lambda: log.closed)
    # Re-acquired after the back-off, with a new epoch.
    await eventually(lambda: any(g.leader_epoch == 1 and not g.closed for g in opens.logs))
    again = await a.partitions.get(topic, 0)
    assert again is not log and again.leader_epoch == 1


async def test_failed_open_releases_the_lease(start_gateway: StartGateway, opens: Opens) -> None:
    a = await start_gateway(1)
    opens.fail.add(0)
    info = await a.topics.create("broken", 1, {})
    with pytest.raises(KafkaApiError) as e:
        await a.partitions.get(info, 0)
    assert e.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert await leases.lease_holder(a.meta, info.topic_id, 0) is None
    opens.fail.clear()
    await eventually(lambda: a.owned(info) == [0])


async def test_deleted_topic_logs_are_deleted_and_leases_gone(
    start_gateway: StartGateway, opens: Opens
) -> None:
    a, b = await start_gateway(1), await start_gateway(2)
    await eventually(lambda: len(a.cluster.gateways()) == 2 and len(b.cluster.gateways()) == 2)
    topic = await a.topics.create("doomed", 4, {})
    await eventually(lambda: len(a.owned(topic)) + len(b.owned(topic)) == 4)
    await b.topics.delete("doomed")
    await eventually(lambda: not a.owned(topic) and not b.owned(topic))
    logs = [g for g in opens.logs if g.topic.topic_id == topic.topic_id]
    assert len(logs) == 4 and all(g.deleted for g in logs)
    await eventually(lambda: not a.cluster.owners(topic.topic_id))
    assert await a.meta.exists(f"{paths.OWNERS}/{topic.topic_id.hex}") is None


async def test_clean_close_releases_everything(start_gateway: StartGateway, opens: Opens) -> None:
    a = await start_gateway(1)
    topic = await a.topics.create("bye", 3, {})
    await eventually(lambda: len(a.owned(topic)) == 3)
    await a.partitions.close()
    assert all(g.closed for g in opens.logs)
    for p in range(3):
        assert await leases.lease_holder(a.meta, topic.topic_id, p) is None
    with pytest.raises(KafkaApiError) as e:
        await a.partitions.get(topic, 0)
    assert e.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_manual_assignment_names_the_owner(start_gateway: StartGateway, opens: Opens) -> None:
    a, b = await start_gateway(1), await start_gateway(2)
    await eventually(lambda: len(a.cluster.gateways()) == 2 and len(b.cluster.gateways()) == 2)
    topic = await a.topics.create("placed", 3, {}, preferred=((2, 1), (1,), (2,)))
    await eventually(lambda: sorted(a.owned(topic)) == [1] and sorted(b.owned(topic)) == [0, 2])
    grown = await a.topics.add_partitions("placed", 4, check=lambda info: ((1,),))
    assert grown.preferred == ((2, 1), (1,), (2,), (1,))
    await eventually(lambda: sorted(a.owned(grown)) == [1, 3] and sorted(b.owned(grown)) == [0, 2])


async def test_a_restarted_gateway_owns_its_free_partitions_before_it_serves(
    start_gateway: StartGateway, opens: Opens
) -> None:
    a = await start_gateway(1)
    topic = await a.topics.create("restarting", 4, {})
    await eventually(lambda: len(a.owned(topic)) == 4)
    await a.stop()
    b = await start_gateway(1)  # the same gateway again, as after a restart
    assert await b.partitions.settle() == 0
    assert b.owned(topic) == [0, 1, 2, 3]  # before it serves: its first Metadata names every leader
    assert all(b.cluster.leader_of(topic.topic_id, p) == 1 for p in range(4))
    await b.stop()
    opens.hold = asyncio.Event()  # opens that do not finish: it serves anyway after the bound
    c = await start_gateway(1)
    assert await c.partitions.settle(within=0.2) == 4
    assert c.owned(topic) == []
    opens.hold.set()
    await eventually(lambda: c.owned(topic) == [0, 1, 2, 3])
