"""TopicRegistry against a real metadata store (embedded and ZooKeeper): CRUD, errors, and
the watch-based cache seen from a second registry (another gateway)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.errors import KafkaApiError
from gateway.topics.registry import TopicRegistry
from kafka_wire.errors import ErrorCode
from store.meta.api import MetaStore
from store.meta.factory import open_meta


@pytest.fixture
async def metas(meta_url: str) -> AsyncIterator[tuple[MetaStore, MetaStore]]:
    a, b = open_meta(meta_url), open_meta(meta_url)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _until(cond, what: str, limit: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not cond():
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_crud_and_errors(metas: tuple[MetaStore, MetaStore]) -> None:
    reg = TopicRegistry(metas[0])
    await reg.start()
    try:
        info = await reg.create("orders", 3, {"retention.ms": "1000"})
        assert (info.partitions, info.configs) == (3, {"retention.ms": "1000"})
        assert info.config("retention.ms") == "1000" and info.config_int("segment.bytes") == 1073741824
        assert await reg.get("orders") == info
        assert await reg.get_by_id(info.topic_id) == info
        assert [t.name for t in await reg.all()] == ["orders"]

        cases = [
            (reg.create("orders", 1, {}), ErrorCode.TOPIC_ALREADY_EXISTS),
            (reg.create("bad name", 1, {}), ErrorCode.INVALID_TOPIC_EXCEPTION),
            (reg.create("x", 0, {}), ErrorCode.INVALID_PARTITIONS),
            (reg.create("x", 1, {"cleanup.policy": "compact,shrink"}), ErrorCode.INVALID_CONFIG),
            (reg.create("x", 1, {"nope": "1"}), ErrorCode.INVALID_CONFIG),
            (reg.add_partitions("orders", 2), ErrorCode.INVALID_PARTITIONS),
            (reg.add_partitions("orders", 3), ErrorCode.INVALID_PARTITIONS),
            (reg.add_partitions("missing", 5), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (reg.delete("missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (reg.alter_configs("orders", {"segment.ms": "0"}), ErrorCode.INVALID_CONFIG),
        ]
        for coro, code in cases:
            with pytest.raises(KafkaApiError) as ei:
                await coro
            assert ei.value.error_code == code, ei.value

        await reg.create("a.b", 1, {})
        with pytest.raises(KafkaApiError) as ei:
            await reg.create("a_b", 1, {})
        assert ei.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION and "collides" in ei.value.message

        assert (await reg.create("dry", 2, {}, validate_only=True)).partitions == 2
        assert await reg.get("dry") is None

        grown = await reg.add_partitions("orders", 5)
        assert grown.partitions == 5 and grown.topic_id == info.topic_id
        altered = await reg.modify_configs("orders", lambda c: {**c, "segment.ms": "60000"})
        assert altered.configs == {"retention.ms": "1000", "segment.ms": "60000"}
        replaced = await reg.alter_configs("orders", {"max.message.bytes": "2000000"})
        assert replaced.configs == {"max.message.bytes": "2000000"}

        gone = await reg.delete("orders")
        assert gone.topic_id == info.topic_id
        assert await reg.get("orders") is None and await reg.get_by_id(info.topic_id) is None
        again = await reg.create("orders", 1, {})
        assert again.topic_id != info.topic_id
    finally:
        await reg.close()


async def test_second_gateway_sees_changes_through_watches(metas: tuple[MetaStore, MetaStore]) -> None:
    a, b = TopicRegistry(metas[0]), TopicRegistry(metas[1])
    await a.start()
    await b.start()
    fired: list[int] = []
    b.add_listener(lambda: fired.append(1))
    try:
        t = await a.create("events", 2, {})
        await _until(lambda: any(x.name == "events" for x in b.cached()), "creation seen by b")
        assert fired
        n = len(fired)
        await a.add_partitions("events", 4)
        await _until(
            lambda: [x.partitions for x in b.cached() if x.name == "events"] == [4], "growth seen by b"
        )
        await a.alter_configs("events", {"retention.ms": "42"})
        await _until(
            lambda: [x.configs for x in b.cached() if x.name == "events"] == [{"retention.ms": "42"}],
            "config change seen by b",
        )
        assert len(fired) > n
        await a.delete("events")
        await _until(lambda: not b.cached(), "deletion seen by b")
        assert await b.get_by_id(t.topic_id) is None
        # A cache miss reads the store directly (no waiting for a watch).
        created = await a.create("fresh", 1, {})
        assert await b.get("fresh") == created
    finally:
        await a.close()
        await b.close()


async def test_watch_event_delivered_before_the_arming_call_returns(
    metas: tuple[MetaStore, MetaStore],
) -> None:
    # kazoo hands both the children() result and the watch event to the loop; the event can run
    # before the awaiting coroutine resumes. The registry must still re-arm its children watch.
    store, other_store = metas
    other = TopicRegistry(other_store)
    await other.start()
    real_children = store.children
    raced = False

    async def children_with_early_event(path: str, watch=None):  # type: ignore[no-untyped-def]
        nonlocal raced
        if watch is None or raced or path != "/kafka/topics":
            return await real_children(path, watch=watch)
        raced = True
        fired = asyncio.Event()

        def relay(event):  # type: ignore[no-untyped-def]
            watch(event)
            fired.set()

        names = await real_children(path, watch=relay)
        await other.create("first", 1, {})
        await asyncio.wait_for(fired.wait(), 10)  # the event has run; now the caller resumes
        return names

    store.children = children_with_early_event  # type: ignore[method-assign]
    reg = TopicRegistry(store)
    await reg.start()
    try:
        assert raced
        await other.create("second", 1, {})
        await _until(lambda: {t.name for t in reg.cached()} == {"first", "second"}, "both topics")
    finally:
        await reg.close()
        await other.close()
