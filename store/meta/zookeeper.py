"""`zk://host:port[,host:port]/chroot`: the metadata store on ZooKeeper, through kazoo.

kazoo's `*_async` calls complete on kazoo's own threads; each is bridged to an asyncio future
with loop.call_soon_threadsafe, and watches and session-state changes are bridged the same
way. The chroot is applied here (not by kazoo) so that it can be created on start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from kazoo import exceptions as kx
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType as KzEventType
from kazoo.protocol.states import KazooState, KeeperState, WatchedEvent, ZnodeStat

from store.meta.api import (
    BadVersionError,
    EventType,
    MetaConnectionError,
    MetaError,
    MetaStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SessionListener,
    Stat,
    Watcher,
    WatchEvent,
)
from store.meta.paths import validate_path

log = logging.getLogger(__name__)

_PREFIX = "zk://"
_EVENT_TYPES = {
    KzEventType.CREATED: EventType.CREATED,
    KzEventType.CHANGED: EventType.CHANGED,
    KzEventType.DELETED: EventType.DELETED,
    KzEventType.CHILD: EventType.CHILDREN,
}
_SESSION_END_STATES = {KeeperState.EXPIRED_SESSION, KeeperState.AUTH_FAILED, KeeperState.CLOSED}
_RECURSIVE_DELETE_ATTEMPTS = 5


def parse_zk_url(url: str) -> tuple[str, str]:
    """'zk://h1:2181,h2:2181/chroot' -> ('h1:2181,h2:2181', '/chroot'); no chroot -> ''."""
    if not url.startswith(_PREFIX):
        raise ValueError(f"not a ZooKeeper metadata URL: {url!r}")
    rest = url[len(_PREFIX) :]
    hosts, slash, chroot = rest.partition("/")
    if not hosts:
        raise ValueError(f"ZooKeeper URL without hosts: {url!r}")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    if chroot:
        validate_path(chroot)
    return hosts, chroot


def _map_error(exc: BaseException) -> BaseException:
    if isinstance(exc, kx.NoNodeError):
        return NoNodeError(str(exc) or "no node")
    if isinstance(exc, kx.NodeExistsError):
        return NodeExistsError(str(exc) or "node exists")
    if isinstance(exc, kx.BadVersionError):
        return BadVersionError(str(exc) or "bad version")
    if isinstance(exc, kx.NotEmptyError):
        return NotEmptyError(str(exc) or "not empty")
    if isinstance(exc, kx.SessionExpiredError):
        return SessionExpiredError(str(exc) or "session expired")
    if isinstance(
        exc,
        kx.ConnectionLoss
        | kx.ConnectionClosedError
        | kx.OperationTimeoutError
        | kx.RequestTimeoutError
        | KazooTimeoutError,
    ):
        return MetaConnectionError(f"ZooKeeper unreachable: {type(exc).__name__} {exc}")
    if isinstance(exc, kx.NoChildrenForEphemeralsError):
        return MetaError("ephemeral nodes cannot have children")
    if isinstance(exc, kx.ZookeeperError | kx.KazooException):
        return MetaError(f"{type(exc).__name__}: {exc}")
    return exc


def _stat(z: ZnodeStat) -> Stat:
    return Stat(
        version=z.version,
        ephemeral_owner=z.ephemeralOwner,
        ctime_ms=z.ctime,
        mtime_ms=z.mtime,
        num_children=z.numChildren,
    )


class _Watch:
    """One registered watch: fires exactly once (ZooKeeper event or session loss).

    kazoo forgets every watch when the connection drops (it calls them with a NONE event),
    although the session, and so the change we wait for, may survive. So on reconnection each
    pending watch is re-armed with a fresh read, compared with the snapshot of the read that
    set it: a difference fires the event missed while disconnected.
    """

    __slots__ = ("child", "fired", "fn", "path", "snapshot", "store")

    def __init__(self, store: ZkMetaStore, path: str, fn: Watcher, *, child: bool) -> None:
        self.store = store
        self.path = path
        self.fn = fn
        self.child = child
        self.fired = False
        # data watch: mzxid of the node (None: absent); child watch: cversion. -1: unknown yet.
        self.snapshot: int | None = -1

    def fire(self, event: WatchEvent) -> None:
        if self.fired:
            return
        self.fired = True
        self.store._watches.discard(self)
        try:
            self.fn(event)
        except Exception:
            log.exception("metadata watcher %r failed on %s", self.fn, event)

    def kazoo_callback(self, event: WatchedEvent) -> None:
        """Runs on a kazoo thread."""
        with contextlib.suppress(RuntimeError):  # loop already closed
            self.store.loop.call_soon_threadsafe(self._deliver, event)

    def _deliver(self, event: WatchedEvent) -> None:
        kind = _EVENT_TYPES.get(event.type)
        if kind is not None:
            self.fire(WatchEvent(kind, self.path))
        elif event.state in _SESSION_END_STATES and not self.store._closing:
            self.fire(WatchEvent(EventType.SESSION_LOST, self.path))
        # Otherwise a connection loss: re-armed on reconnection (ZkMetaStore._rearm).

    async def rearm(self, client: KazooClient) -> None:
        full = self.store._full(self.path)
        if self.child:
            try:
                _, zstat = await self.store._bridge(
                    client.get_children_async(full, self.kazoo_callback, include_data=True)
                )
            except NoNodeError:
                self.fire(WatchEvent(EventType.DELETED, self.path))
                return
            if zstat.cversion != self.snapshot:
                self.fire(WatchEvent(EventType.CHILDREN, self.path))
            return
        zstat = await self.store._bridge(client.exists_async(full, self.kazoo_callback))
        now = None if zstat is None else zstat.mzxid
        if now == self.snapshot:
            return
        if now is None:
            self.fire(WatchEvent(EventType.DELETED, self.path))
        elif self.snapshot is None:
            self.fire(WatchEvent(EventType.CREATED, self.path))
        else:
            self.fire(WatchEvent(EventType.CHANGED, self.path))


class ZkMetaStore(MetaStore):
    def __init__(self, url: str, *, session_timeout: float = 10.0) -> None:
        if session_timeout <= 0:
            raise ValueError("session_timeout must be positive")
        self._hosts, self._chroot = parse_zk_url(url)
        self._timeout = session_timeout
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sid = 0
        self._lost = False
        self._closing = False
        self._listeners: list[SessionListener] = []
        self._watches: set[_Watch] = set()
        self._suspended = False
        self._rearm_tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._client is not None:
            raise RuntimeError("store already started")
        self._loop = asyncio.get_running_loop()
        client = KazooClient(
            hosts=self._hosts,
            timeout=self._timeout,
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0},
        )
        self._client = client
        try:
            await asyncio.to_thread(client.start, max(self._timeout, 2.0))
        except Exception as e:
            await asyncio.to_thread(self._shutdown_client, client)
            self._client = None
            raise MetaConnectionError(f"cannot connect to ZooKeeper at {self._hosts}: {e}") from e
        client_id = client.client_id
        self._sid = int(client_id[0]) if client_id else 0
        client.add_listener(self._on_state)
        if self._chroot:
            await self._bridge(client.ensure_path_async(self._chroot))

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._watches.clear()
        client = self._client
        if client is not None:
            await asyncio.to_thread(self._shutdown_client, client)

    @staticmethod
    def _shutdown_client(client: KazooClient) -> None:
        try:
            client.stop()
        finally:
            client.close()

    @property
    def session_id(self) -> int:
        return self._sid

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop this store was started on (watchers and listeners run there)."""
        assert self._loop is not None, "store not started"
        return self._loop

    def add_session_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    # -- operations -----------------------------------------------------------------------------

    async def _get(self, path: str, watch: Watcher | None) -> tuple[bytes, Stat]:
        client = self._live(path)
        w = self._watch(path, watch, child=False)
        try:
            data, zstat = await self._bridge(client.get_async(self._full(path), w and w.kazoo_callback))
        except BaseException:
            self._unwatch(w)  # no watch is left on the server when the read fails
            raise
        if w is not None:
            w.snapshot = zstat.mzxid
        return bytes(data), _stat(zstat)

    async def _exists(self, path: str, watch: Watcher | None) -> Stat | None:
        client = self._live(path)
        w = self._watch(path, watch, child=False)
        try:
            zstat = await self._bridge(client.exists_async(self._full(path), w and w.kazoo_callback))
        except BaseException:
            self._unwatch(w)
            raise
        if w is not None:
            w.snapshot = None if zstat is None else zstat.mzxid
        return None if zstat is None else _stat(zstat)

    async def _children(self, path: str, watch: Watcher | None) -> list[str]:
        client = self._live(path)
        w = self._watch(path, watch, child=True)
        try:
            if w is None:
                names = await self._bridge(client.get_children_async(self._full(path)))
            else:
                names, zstat = await self._bridge(
                    client.get_children_async(self._full(path), w.kazoo_callback, include_data=True)
                )
                w.snapshot = zstat.cversion
        except BaseException:
            self._unwatch(w)
            raise
        return sorted(names)

    async def _create(self, path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool) -> str:
        client = self._live(path)
        created = await self._bridge(
            client.create_async(
                self._full(path), bytes(data), ephemeral=ephemeral, sequence=sequential, makepath=make_parents
            )
        )
        return self._strip(created)

    async def _set(self, path: str, data: bytes, version: int) -> Stat:
        client = self._live(path)
        return _stat(await self._bridge(client.set_async(self._full(path), bytes(data), version)))

    async def _delete(self, path: str, version: int, recursive: bool) -> None:
        client = self._live(path)
        full = self._full(path)
        if not recursive:
            await self._bridge(client.delete_async(full, version))
            return
        for _ in range(_RECURSIVE_DELETE_ATTEMPTS):
            zstat = await self._bridge(client.exists_async(full))
            if zstat is None:
                raise NoNodeError(path)
            if version != -1 and zstat.version != version:
                raise BadVersionError(f"{path}: expected version {version}, found {zstat.version}")
            for child in await self._bridge(client.get_children_async(full)):
                await self._delete_tree(client, f"{full}/{child}")
            try:
                await self._bridge(client.delete_async(full, version))
                return
            except NotEmptyError:
                continue  # a child appeared meanwhile: go again
        raise NotEmptyError(f"{path}: children keep appearing during recursive delete")

    # -- internals ------------------------------------------------------------------------------

    async def _delete_tree(self, client: KazooClient, full: str) -> None:
        try:
            kids = await self._bridge(client.get_children_async(full))
        except NoNodeError:
            return
        for child in kids:
            await self._delete_tree(client, f"{full}/{child}")
        with contextlib.suppress(NoNodeError):
            await self._bridge(client.delete_async(full))

    def _live(self, path: str) -> KazooClient:
        validate_path(path)
        if self._lost:
            raise SessionExpiredError(f"ZooKeeper session {self._sid:#x} expired")
        if self._closing or self._client is None:
            raise RuntimeError("metadata store is not started or already closed")
        return self._client

    def _full(self, path: str) -> str:
        if not self._chroot:
            return path
        return self._chroot if path == "/" else self._chroot + path

    def _strip(self, full: str) -> str:
        if not self._chroot:
            return full
        return full[len(self._chroot) :] or "/"

    def _watch(self, path: str, fn: Watcher | None, *, child: bool) -> _Watch | None:
        if fn is None:
            return None
        w = _Watch(self, path, fn, child=child)
        self._watches.add(w)
        return w

    def _unwatch(self, w: _Watch | None) -> None:
        if w is not None:
            w.fired = True
            self._watches.discard(w)

    def _bridge(self, result: Any) -> asyncio.Future[Any]:
        """kazoo IAsyncResult -> asyncio future (errors mapped to api.py's)."""
        loop = self.loop
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(res: Any) -> None:
            if fut.done():
                return
            try:
                if res.successful():
                    fut.set_result(res.value)
                else:
                    fut.set_exception(_map_error(res.exception))
            except Exception as e:  # never leave the caller waiting forever
                fut.set_exception(e)

        def done(res: Any) -> None:  # kazoo thread
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, res)

        result.rawlink(done)
        return fut

    def _on_state(self, state: str) -> None:
        """kazoo connection-state listener; runs on a kazoo thread."""
        with contextlib.suppress(RuntimeError):
            if state == KazooState.LOST:
                self.loop.call_soon_threadsafe(self._session_lost)
            elif state == KazooState.SUSPENDED:
                self._suspended = True
            elif state == KazooState.CONNECTED and self._suspended:
                self._suspended = False
                self.loop.call_soon_threadsafe(self._start_rearm)

    def _start_rearm(self) -> None:
        if self._lost or self._closing or not self._watches:
            return
        task = self.loop.create_task(self._rearm())
        self._rearm_tasks.add(task)
        task.add_done_callback(self._rearm_tasks.discard)

    async def _rearm(self) -> None:
        client = self._client
        if client is None or client.client_id is None or client.client_id[0] != self._sid:
            return  # a new session: the old one is lost, LOST handles its watches
        for w in list(self._watches):
            if w.fired or w.snapshot == -1:
                continue  # -1: its read was queued by kazoo and goes out on this new connection
            try:
                await w.rearm(client)
            except MetaError as e:
                # Connection lost again (the next reconnection retries) or session gone.
                log.info("re-arming watch on %s: %s", w.path, e)

    def _session_lost(self) -> None:
        if self._lost or self._closing:
            return
        self._lost = True
        log.warning("ZooKeeper session %#x lost", self._sid)
        for w in list(self._watches):
            w.fire(WatchEvent(EventType.SESSION_LOST, w.path))
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                log.exception("session listener %r failed", listener)
