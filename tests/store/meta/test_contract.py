"""The MetaStore contract, run against both implementations (embedded SQLite and ZooKeeper)."""

from __future__ import annotations

import asyncio
import random
import re

import pytest

from store.meta.api import (
    BadVersionError,
    EventType,
    MetaError,
    MetaStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    WatchEvent,
)
from tests.support.wait import eventually

from .conftest import Events, StoreFactory


async def test_create_get_and_stat(open_store: StoreFactory) -> None:
    m = await open_store()
    assert m.session_id != 0
    assert await m.create("/a", b"hello") == "/a"
    data, stat = await m.get("/a")
    assert data == b"hello"
    assert stat.version == 0
    assert stat.ephemeral_owner == 0
    assert stat.num_children == 0
    assert stat.ctime_ms == stat.mtime_ms > 0
    assert await m.exists("/a") == stat
    assert await m.exists("/missing") is None
    with pytest.raises(NoNodeError):
        await m.get("/missing")
    await m.create("/a/b")
    assert (await m.get("/a"))[1].num_children == 1
    assert (await m.get("/a/b"))[0] == b""


async def test_create_errors_and_make_parents(open_store: StoreFactory) -> None:
    m = await open_store()
    await m.create("/x", b"1")
    with pytest.raises(NodeExistsError):
        await m.create("/x", b"2")
    assert (await m.get("/x"))[0] == b"1"
    with pytest.raises(NoNodeError):
        await m.create("/no/such/parent", b"")
    assert await m.exists("/no") is None
    assert await m.create("/p/q/r", b"leaf", make_parents=True) == "/p/q/r"
    assert (await m.get("/p/q/r"))[0] == b"leaf"
    assert (await m.get("/p/q"))[0] == b""
    assert await m.exists("/p/q")
    # make_parents with existing ancestors, and the target already existing
    assert await m.create("/p/q/s", make_parents=True) == "/p/q/s"
    with pytest.raises(NodeExistsError):
        await m.create("/p/q/r", make_parents=True)


async def test_set_compare_and_set(open_store: StoreFactory) -> None:
    m = await open_store()
    await m.create("/n", b"v0")
    stat = await m.set("/n", b"v1", version=0)
    assert stat.version == 1
    with pytest.raises(BadVersionError):
        await m.set("/n", b"stale", version=0)
    assert (await m.get("/n"))[0] == b"v1"
    stat = await m.set("/n", b"v2")  # -1: any version
    assert stat.version == 2
    data, stat2 = await m.get("/n")
    assert data == b"v2" and stat2.version == 2 and stat2.mtime_ms >= stat2.ctime_ms
    with pytest.raises(NoNodeError):
        await m.set("/missing", b"x")


async def test_delete_versioned_recursive_and_not_empty(open_store: StoreFactory) -> None:
    m = await open_store()
    await m.create("/d", b"")
    await m.set("/d", b"1")
    with pytest.raises(BadVersionError):
        await m.delete("/d", version=0)
    await m.delete("/d", version=1)
    assert await m.exists("/d") is None
    with pytest.raises(NoNodeError):
        await m.delete("/d")

    await m.create("/t/a/b/c", make_parents=True)
    await m.create("/t/a/x")
    await m.create("/t2")  # shares a prefix with /t but is not under it
    with pytest.raises(NotEmptyError):
        await m.delete("/t")
    with pytest.raises(BadVersionError):
        await m.delete("/t", version=7, recursive=True)
    assert await m.exists("/t/a/b/c") is not None  # a failed versioned delete removes nothing
    await m.delete("/t", recursive=True)
    for p in ("/t", "/t/a", "/t/a/b", "/t/a/b/c", "/t/a/x"):
        assert await m.exists(p) is None
    assert await m.exists("/t2") is not None
    await m.delete("/t2", recursive=True)  # recursive on a leaf is a plain delete
    assert await m.exists("/t2") is None


async def test_children_sorted(open_store: StoreFactory) -> None:
    m = await open_store()
    await m.create("/c")
    names = [f"n{i}" for i in range(30)] + ["a", "Z", "b-1", "b"]
    random.Random(7).shuffle(names)
    for name in names:
        await m.create(f"/c/{name}")
    await m.create("/c/n3/deeper")
    assert await m.children("/c") == sorted(names)
    assert (await m.get("/c"))[1].num_children == len(names)
    assert await m.children("/c/a") == []
    with pytest.raises(NoNodeError):
        await m.children("/nothing")
    assert "c" in await m.children("/")


async def test_sequential_names(open_store: StoreFactory) -> None:
    m = await open_store()
    await m.create("/q")
    first = await m.create("/q/item-", b"1", sequential=True)
    second = await m.create("/q/item-", b"2", sequential=True)
    other = await m.create("/q/other-", sequential=True, ephemeral=True)
    for p in (first, second, other):
        assert re.fullmatch(r"/q/(item|other)-\d{10}", p), p
    assert int(first[-10:]) < int(second[-10:]) < int(other[-10:])
    assert (await m.get(first))[0] == b"1"
    assert await m.children("/q") == sorted(p.rsplit("/", 1)[1] for p in (first, second, other))
    # Counters never repeat, even after deletes.
    await m.delete(second)
    third = await m.create("/q/item-", sequential=True)
    assert int(third[-10:]) > int(other[-10:])


@pytest.mark.parametrize(
    "bad",
    ["", "a", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/.", "/a\x00b"],
)
async def test_invalid_paths_raise_value_error(open_store: StoreFactory, bad: str) -> None:
    m = await open_store()
    with pytest.raises(ValueError):
        await m.create(bad, b"")
    with pytest.raises(ValueError):
        await m.get(bad)
    with pytest.raises(ValueError):
        await m.exists(bad)
    with pytest.raises(ValueError):
        await m.set(bad, b"")
    with pytest.raises(ValueError):
        await m.delete(bad)
    with pytest.raises(ValueError):
        await m.children(bad)


async def test_root_cannot_be_created_or_deleted(open_store: StoreFactory) -> None:
    m = await open_store()
    assert await m.exists("/") is not None
    with pytest.raises(ValueError):
        await m.create("/")
    with pytest.raises(ValueError):
        await m.delete("/", recursive=True)


async def test_ephemeral_nodes(open_store: StoreFactory) -> None:
    a = await open_store()
    b = await open_store()
    assert a.session_id != b.session_id
    await a.create("/e")
    await a.create("/e/lease", b"owner-a", ephemeral=True)
    stat = await b.exists("/e/lease")
    assert stat is not None and stat.ephemeral_owner == a.session_id
    with pytest.raises(MetaError):
        await a.create("/e/lease/child")
    lost: list[int] = []
    a.add_session_listener(lambda: lost.append(1))
    await a.close()
    assert await b.exists("/e/lease") is None  # gone at once on close
    assert await b.exists("/e") is not None  # persistent nodes stay
    assert lost == []  # closing is not losing the session


async def test_data_watch_is_one_shot(open_store: StoreFactory) -> None:
    m = await open_store()
    await m.create("/w", b"0")
    events = Events()
    await m.get("/w", watch=events)
    await m.set("/w", b"1")
    await m.set("/w", b"2")
    assert await events.next() == WatchEvent(EventType.CHANGED, "/w")
    # Re-arm: the next change fires again, deletion gives DELETED.
    await m.get("/w", watch=events)
    await m.delete("/w")
    assert await events.next() == WatchEvent(EventType.DELETED, "/w")
    await asyncio.sleep(0.3)  # let any stray duplicate arrive before counting
    assert len(events.seen) == 2


async def test_exists_watch_fires_on_create_and_change(open_store: StoreFactory) -> None:
    m = await open_store()
    events = Events()
    assert await m.exists("/later", watch=events) is None
    await m.create("/later", b"x")
    assert await events.next() == WatchEvent(EventType.CREATED, "/later")
    assert await m.exists("/later", watch=events) is not None
    await m.set("/later", b"y")
    assert await events.next() == WatchEvent(EventType.CHANGED, "/later")


async def test_get_on_missing_node_sets_no_watch(open_store: StoreFactory) -> None:
    m = await open_store()
    events = Events()
    with pytest.raises(NoNodeError):
        await m.get("/ghost", watch=events)
    await m.create("/ghost")
    marker = Events()
    await m.exists("/ghost", watch=marker)
    await m.set("/ghost", b"1")
    await marker.next()  # by now a watch from the failed get would have fired too
    assert events.seen == []


async def test_children_watch(open_store: StoreFactory) -> None:
    m = await open_store()
    await m.create("/cw")
    events = Events()
    assert await m.children("/cw", watch=events) == []
    await m.create("/cw/a")
    assert await events.next() == WatchEvent(EventType.CHILDREN, "/cw")
    # Data changes of the parent or of a child are not child events.
    await m.children("/cw", watch=events)
    await m.set("/cw", b"data")
    await m.set("/cw/a", b"data")
    await m.delete("/cw/a")
    assert await events.next() == WatchEvent(EventType.CHILDREN, "/cw")
    await m.children("/cw", watch=events)
    await m.delete("/cw")
    assert await events.next() == WatchEvent(EventType.DELETED, "/cw")


async def test_watches_fire_across_stores(open_store: StoreFactory) -> None:
    a = await open_store()
    b = await open_store()
    await a.create("/x", b"0")
    data_events, child_events, exist_events = Events(), Events(), Events()
    await b.get("/x", watch=data_events)
    await b.children("/x", watch=child_events)
    await b.exists("/y", watch=exist_events)
    await a.set("/x", b"1")
    await a.create("/x/kid", ephemeral=True)
    await a.create("/y")
    assert await data_events.next() == WatchEvent(EventType.CHANGED, "/x")
    assert await child_events.next() == WatchEvent(EventType.CHILDREN, "/x")
    assert await exist_events.next() == WatchEvent(EventType.CREATED, "/y")
    # The ephemeral child vanishing on close is a child event too.
    await b.children("/x", watch=child_events)
    await a.close()
    assert await child_events.next() == WatchEvent(EventType.CHILDREN, "/x")


async def test_concurrent_sequential_creates_are_unique(open_store: StoreFactory) -> None:
    a = await open_store()
    b = await open_store()
    await a.create("/seq")
    per_store = 40
    results = await asyncio.gather(
        *(s.create("/seq/n-", sequential=True) for s in (a, b) for _ in range(per_store))
    )
    assert len(set(results)) == 2 * per_store
    assert sorted(await a.children("/seq")) == sorted(r.rsplit("/", 1)[1] for r in results)


async def test_concurrent_compare_and_set_loses_no_update(open_store: StoreFactory) -> None:
    a = await open_store()
    b = await open_store()
    await a.create("/counter", b"0")

    async def bump(store_: MetaStore, times: int) -> None:
        for _ in range(times):
            while True:
                data, stat = await store_.get("/counter")
                try:
                    await store_.set("/counter", str(int(data) + 1).encode(), version=stat.version)
                    break
                except BadVersionError:
                    continue

    await asyncio.gather(bump(a, 15), bump(b, 15), bump(a, 15), bump(b, 15))
    data, stat = await a.get("/counter")
    assert int(data) == 60 and stat.version == 60


async def test_reads_see_other_stores_writes(open_store: StoreFactory) -> None:
    a = await open_store()
    b = await open_store()
    await a.create("/shared", b"from-a")
    assert (await b.get("/shared"))[0] == b"from-a"

    async def b_sees_update() -> bool:
        return (await b.get("/shared"))[0] == b"from-b"

    await a.set("/shared", b"from-b")
    await eventually(b_sees_update)
