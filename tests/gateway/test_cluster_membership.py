"""Gateway membership over the real metadata stores (embedded and ZooKeeper)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import pytest

from gateway import paths
from gateway.cluster.membership import (
    FIRST_AUTO_NODE_ID,
    ClusterView,
    GatewayNode,
    NodeIdInUseError,
    allocate_node_id,
    ensure_cluster_id,
)
from store.meta.api import (
    EventType,
    MetaConnectionError,
    MetaStore,
    SessionExpiredError,
    Stat,
    Watcher,
    WatchEvent,
)
from store.meta.factory import open_meta
from tests.support.wait import eventually

Opener = Callable[[], Awaitable[MetaStore]]


@pytest.fixture
async def open_store(meta_url: str) -> AsyncIterator[Opener]:
    opened: list[MetaStore] = []

    async def factory() -> MetaStore:
        store = open_meta(meta_url, session_timeout=3.0)
        await store.start()
        opened.append(store)
        return store

    yield factory
    for store in reversed(opened):
        try:
            await store.close()
        except Exception:
            pass


async def test_gateways_see_each_other_and_agree(open_store: Opener) -> None:
    m1, m2 = await open_store(), await open_store()
    v1 = ClusterView(m1, GatewayNode(7, "127.0.0.1", 9001, "r1"))
    await v1.start()
    assert [n.node_id for n in v1.gateways()] == [7]
    assert v1.controller_id == 7
    v2 = ClusterView(m2, GatewayNode(3, "127.0.0.1", 9002, None))
    await v2.start()
    await eventually(lambda: len(v1.gateways()) == 2)
    assert (
        v1.gateways()
        == v2.gateways()
        == [
            GatewayNode(3, "127.0.0.1", 9002, None),
            GatewayNode(7, "127.0.0.1", 9001, "r1"),
        ]
    )
    assert v1.controller_id == v2.controller_id == 3
    assert v1.cluster_id == v2.cluster_id
    assert len(v1.cluster_id) == 22
    assert await ensure_cluster_id(m1) == v1.cluster_id

    # A gateway that goes away (its session ends) drops out; the controller moves.
    await v2.close()
    await m2.close()
    await eventually(lambda: [n.node_id for n in v1.gateways()] == [7])
    assert v1.controller_id == 7
    await v1.close()
    assert await m1.exists(paths.gateway(7)) is None


async def test_node_ids_are_stable_per_address(open_store: Opener) -> None:
    m1, m2 = await open_store(), await open_store()
    ids = await asyncio.gather(
        allocate_node_id(m1, "127.0.0.1", 1),
        allocate_node_id(m2, "127.0.0.1", 2),
        allocate_node_id(m1, "h", 3),
    )
    assert sorted(ids) == [FIRST_AUTO_NODE_ID, FIRST_AUTO_NODE_ID + 1, FIRST_AUTO_NODE_ID + 2]
    assert await allocate_node_id(m2, "127.0.0.1", 1) == ids[0]
    assert await allocate_node_id(m1, "h", 3) == ids[2]


async def test_live_duplicate_node_id_is_refused(open_store: Opener) -> None:
    m1, m2 = await open_store(), await open_store()
    v1 = ClusterView(m1, GatewayNode(1, "127.0.0.1", 9001))
    await v1.start()
    v2 = ClusterView(m2, GatewayNode(1, "127.0.0.1", 9002))
    with pytest.raises(NodeIdInUseError):
        await v2.start(register_wait=0.5)
    # Still registered by the first one.
    _, stat = await m1.get(paths.gateway(1))
    assert stat.ephemeral_owner == m1.session_id
    await v1.close()


async def test_stale_registration_of_same_address_is_replaced(open_store: Opener) -> None:
    # A killed gateway restarted on the same address does not wait for its old session to expire.
    old, new = await open_store(), await open_store()
    await ClusterView(old, GatewayNode(5, "127.0.0.1", 9005)).start()
    view = ClusterView(new, GatewayNode(5, "127.0.0.1", 9005))
    await view.start(register_wait=0.5)
    _, stat = await new.get(paths.gateway(5))
    assert stat.ephemeral_owner == new.session_id
    assert [n.node_id for n in view.gateways()] == [5]
    await view.close()


class HeldReads:
    """A metadata store whose plain reads (no watch) of `hold` paths return what they read
    only once `release` is set: a slow read, overtaken by a later one."""

    def __init__(self, inner: MetaStore) -> None:
        self.inner = inner
        self.hold: set[str] = set()
        self.held = 0
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(self, path: str, watch: Any = None) -> tuple[bytes, Any]:
        got = await self.inner.get(path, watch=watch)
        if watch is None and path in self.hold:
            self.held += 1
            await self.release.wait()
        return got


async def test_a_slow_lease_read_does_not_undo_a_newer_epoch(open_store: Opener) -> None:
    # Regression: a re-read of every lease of a topic (after a children change) applied what it
    # read even when a watch-triggered read of the same lease had meanwhile seen the owner's
    # newly published epoch: the view kept the old epoch, and no further event corrected it.
    m1, m2 = await open_store(), await open_store()
    tid = uuid.uuid4()

    def lease(epoch: int) -> bytes:
        return json.dumps({"node_id": 2, "leader_epoch": epoch}).encode()

    await m2.create(paths.owner(tid, 0), lease(-1), ephemeral=True, make_parents=True)
    store = HeldReads(m1)
    view = ClusterView(cast(MetaStore, store), GatewayNode(1, "127.0.0.1", 9001, None))
    await view.start()
    try:
        await eventually(lambda: view.leader_of(tid, 0) == 2)
        store.hold.add(paths.owner(tid, 0))
        # Another lease appears: the view re-reads the topic's leases; partition 0's read
        # (its watch is already set) sees epoch -1 and is held back.
        await m2.create(paths.owner(tid, 1), lease(-1), ephemeral=True)
        await eventually(lambda: store.held == 1)
        # The owner publishes epoch 1 meanwhile: the watch fires and the view reads it.
        _, stat = await m2.get(paths.owner(tid, 0))
        await m2.set(paths.owner(tid, 0), lease(1), stat.version)
        await eventually(lambda: view.leader_epoch_of(tid, 0) == 1)
        store.release.set()
        await eventually(lambda: view.leader_of(tid, 1) == 2)  # the held re-read is applied
        assert view.leader_epoch_of(tid, 0) == 1
        assert view.leader_epoch_of(tid, 1) == -1
    finally:
        await view.close()


class Flaky:
    """A metadata store that loses its connection (reads of `down` paths raise
    MetaConnectionError) or its session (pending watches get SESSION_LOST, then every read
    raises SessionExpiredError), as ZkMetaStore does."""

    def __init__(self, inner: MetaStore) -> None:
        self.inner = inner
        self.down: set[str] = set()
        self.lost = False
        self.refused = 0
        self._watches: list[tuple[str, Watcher]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _enter(self, path: str, watch: Watcher | None) -> Watcher | None:
        if self.lost or path in self.down:
            self.refused += 1
            raise SessionExpiredError("session expired") if self.lost else MetaConnectionError("connection lost")
        if watch is None:
            return None
        fired: list[bool] = []

        def once(event: WatchEvent) -> None:
            if not fired:
                fired.append(True)
                watch(event)

        self._watches.append((path, once))
        return once

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        return await self.inner.get(path, watch=self._enter(path, watch))

    async def children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return await self.inner.children(path, watch=self._enter(path, watch))

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        return await self.inner.exists(path, watch=self._enter(path, watch))

    def lose_session(self) -> None:
        self.lost = True
        for path, watch in self._watches:
            watch(WatchEvent(EventType.SESSION_LOST, path))


def _lease(epoch: int) -> bytes:
    return json.dumps({"node_id": 2, "leader_epoch": epoch}).encode()


async def test_a_lease_reread_meeting_a_connection_loss_is_retried(
        open_store: Opener, caplog: pytest.LogCaptureFixture) -> None:
    m1, m2 = await open_store(), await open_store()
    tid = uuid.uuid4()
    await m2.create(paths.owner(tid, 0), _lease(-1), ephemeral=True, make_parents=True)
    store = Flaky(m1)
    view = ClusterView(cast(MetaStore, store), GatewayNode(1, "127.0.0.1", 9001, None))
    await view.start()
    try:
        await eventually(lambda: view.leader_of(tid, 0) == 2)
        store.down.add(paths.owner(tid, 0))
        _, stat = await m2.get(paths.owner(tid, 0))
        await m2.set(paths.owner(tid, 0), _lease(1), stat.version)  # the watch fires: a re-read fails
        await eventually(lambda: store.refused > 0)
        store.down.clear()
        await eventually(lambda: view.leader_epoch_of(tid, 0) == 1)  # read again once reconnected
    finally:
        await view.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_lost_session_leaves_no_failed_task(open_store: Opener, caplog: pytest.LogCaptureFixture) -> None:
    """Regression: each lease watch, fired by the session loss, re-read its lease in a task
    that failed with SessionExpiredError: "Task exception was never retrieved"."""
    m1, m2 = await open_store(), await open_store()
    tid = uuid.uuid4()
    await m2.create(paths.owner(tid, 0), _lease(3), ephemeral=True, make_parents=True)
    store = Flaky(m1)
    view = ClusterView(cast(MetaStore, store), GatewayNode(1, "127.0.0.1", 9001, None))
    await view.start()
    unhandled: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unhandled.append(context))
    try:
        await eventually(lambda: view.leader_epoch_of(tid, 0) == 3)
        store.lose_session()
        # The followers of the gateways, the topics and the topic's leases each meet it and end.
        await eventually(lambda: store.refused >= 3)
        await view.close()
        gc.collect()  # a finished task's unretrieved exception is reported when it is collected
    finally:
        loop.set_exception_handler(None)
    assert unhandled == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
