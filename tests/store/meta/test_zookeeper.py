"""ZooKeeper store: URL handling, chroots, and real session expiry of a frozen client process."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

import pytest

from store.meta.api import EventType, MetaConnectionError, WatchEvent
from store.meta.factory import open_meta
from store.meta.zookeeper import ZkMetaStore, parse_zk_url
from store.net import free_port
from tests.support.zookeeper import ZooKeeperServer

from .conftest import ChildClient, Events

Spawn = Callable[[str, float], ChildClient]


def test_parse_zk_url() -> None:
    assert parse_zk_url("zk://h1:2181,h2:2182/quire/prod") == ("h1:2181,h2:2182", "/quire/prod")
    assert parse_zk_url("zk://h1:2181") == ("h1:2181", "")
    assert parse_zk_url("zk://h1:2181/") == ("h1:2181", "")
    with pytest.raises(ValueError):
        parse_zk_url("zk:///chroot")
    with pytest.raises(ValueError):
        parse_zk_url("zk://h:1/a//b")
    assert isinstance(open_meta("zk://127.0.0.1:1/x"), ZkMetaStore)


async def test_chroot_is_created_and_isolates(zookeeper: ZooKeeperServer) -> None:
    root = open_meta(f"zk://{zookeeper.address}")
    a = open_meta(zookeeper.url("/iso/a"))
    b = open_meta(zookeeper.url("/iso/b"))
    for s in (root, a, b):
        await s.start()
    try:
        await a.create("/same", b"from-a")
        await b.create("/same", b"from-b")
        assert (await a.get("/same"))[0] == b"from-a"
        assert (await b.get("/same"))[0] == b"from-b"
        assert await root.children("/iso") == ["a", "b"]
        assert (await root.get("/iso/a/same"))[0] == b"from-a"
        created = await a.create("/seq-", sequential=True)
        assert created.startswith("/seq-")  # returned paths are relative to the chroot
        events = Events()
        await a.children("/", watch=events)
        await root.create("/iso/a/via-root")
        assert await events.next() == WatchEvent(EventType.CHILDREN, "/")
    finally:
        for s in (a, b, root):
            await s.close()


async def test_unreachable_server_is_a_connection_error() -> None:
    m = open_meta(f"zk://127.0.0.1:{free_port()}/x", session_timeout=1.0)
    with pytest.raises(MetaConnectionError):
        await m.start()
    await m.close()


async def test_frozen_client_session_expires(zookeeper: ZooKeeperServer, spawn_child: Spawn) -> None:
    url = zookeeper.url()
    m = open_meta(url, session_timeout=10.0)
    await m.start()
    try:
        child = await asyncio.to_thread(spawn_child, url, 1.0)
        assert await child.ask("create /lease x eph") == "OK /lease"
        assert await child.ask("watch /pending") == "OK"
        events = Events()
        stat = await m.exists("/lease", watch=events)
        assert stat is not None and stat.ephemeral_owner == child.session_id
        child.signal(signal.SIGSTOP)
        # ZooKeeper expires the silent session and deletes its ephemeral node.
        assert await events.next() == WatchEvent(EventType.DELETED, "/lease")
        assert await m.exists("/lease") is None
        child.signal(signal.SIGCONT)
        assert await child.expect_async("LOST") == "LOST"
        assert await child.expect_async("EVENT") == "EVENT session_lost /pending"
        assert await child.ask("set /x y") == "ERR SessionExpiredError"
    finally:
        await m.close()


class CuttableProxy:
    """A loopback TCP proxy to ZooKeeper whose live connections the test can cut, so a client
    loses its connection (and kazoo its watches) while its session lives on."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers |= {writer, up_writer}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._writers -= {writer, up_writer}

    def cut(self) -> None:
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def test_watches_survive_a_connection_loss(zookeeper: ZooKeeperServer) -> None:
    proxy = CuttableProxy(zookeeper.port)
    await proxy.start()
    chroot = zookeeper.url().rsplit("/", 1)[1]
    direct = open_meta(zookeeper.url("/" + chroot))
    flaky = open_meta(f"zk://127.0.0.1:{proxy.port}/{chroot}", session_timeout=10.0)
    await direct.start()
    await flaky.start()
    try:
        await direct.create("/changed", b"0")
        await direct.create("/steady", b"0")
        await direct.create("/parent")
        lost: list[int] = []
        flaky.add_session_listener(lambda: lost.append(1))
        changed, steady, kids, created = Events(), Events(), Events(), Events()
        await flaky.get("/changed", watch=changed)
        await flaky.get("/steady", watch=steady)
        await flaky.children("/parent", watch=kids)
        assert await flaky.exists("/born", watch=created) is None
        session = flaky.session_id

        proxy.cut()  # kazoo notices at once, drops its watches and reconnects: same session
        await direct.set("/changed", b"1")
        await direct.create("/parent/kid")
        await direct.create("/born")
        # Events missed while disconnected are delivered after reconnection.
        assert await changed.next() == WatchEvent(EventType.CHANGED, "/changed")
        assert await kids.next() == WatchEvent(EventType.CHILDREN, "/parent")
        assert await created.next() == WatchEvent(EventType.CREATED, "/born")
        assert flaky.session_id == session and lost == []
        # An unchanged node's watch is armed again and fires on the next change.
        assert steady.seen == []
        await direct.set("/steady", b"1")
        assert await steady.next() == WatchEvent(EventType.CHANGED, "/steady")
        assert (await flaky.get("/changed"))[0] == b"1"
    finally:
        await flaky.close()
        await direct.close()
        await proxy.close()
