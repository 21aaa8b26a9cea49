"""Gateway membership: who is live, node ids, the cluster id, and who owns which partition.

Each gateway registers an ephemeral node paths.gateway(node_id) holding its advertised address;
ClusterView follows GATEWAYS (the sorted live list) and OWNERS (the partition leases, so
leader_of() answers from memory). The controller is the lowest live node id, as every gateway
computes it identically.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway import paths
from gateway.cluster.follow import RETRY_BACKOFF, follow_children
from store.meta.api import (
    BadVersionError,
    EventType,
    MetaError,
    MetaStore,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    WatchEvent,
)
from store.retry import Retry
from store.tasks import within

if TYPE_CHECKING:
    from gateway.topics.registry import TopicRegistry

log = logging.getLogger(__name__)

# Node ids allocated automatically are stable per advertised address. They start above Kafka's
# reserved.broker.max.id (1000), as Kafka's generated broker ids do, so they never collide with
# ids given explicitly with --id.
NODE_IDS = "/kafka/node-ids"  # persistent child per advertised "host:port": its node id
NODE_ID_COUNTER = "/kafka/node-id-counter"  # the last allocated id (CAS)
FIRST_AUTO_NODE_ID = 1001


@dataclass(frozen=True)
class GatewayNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    def to_bytes(self) -> bytes:
        doc = {"node_id": self.node_id, "host": self.host, "port": self.port, "rack": self.rack}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> GatewayNode:
        d = json.loads(data)
        return cls(int(d["node_id"]), str(d["host"]), int(d["port"]), d.get("rack"))


def new_cluster_id() -> str:
    """Kafka's format: a random UUID, base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


async def ensure_cluster_id(meta: MetaStore) -> str:
    """The cluster id, created once by whichever gateway gets there first."""
    try:
        data, _ = await meta.get(paths.CLUSTER_ID)
        return data.decode()
    except NoNodeError:
        pass
    cid = new_cluster_id()
    try:
        await meta.create(paths.CLUSTER_ID, cid.encode(), make_parents=True)
        return cid
    except NodeExistsError:
        data, _ = await meta.get(paths.CLUSTER_ID)
        return data.decode()


async def allocate_node_id(meta: MetaStore, host: str, port: int) -> int:
    """A node id for a gateway started without --id: the same one every time for the same
    advertised address (a persistent map in the metadata store), else the next free one."""
    key = f"{NODE_IDS}/{host}:{port}"
    with contextlib.suppress(NoNodeError):
        data, _ = await meta.get(key)
        return int(data)
    while True:
        try:
            data, stat = await meta.get(NODE_ID_COUNTER)
            last, version = int(data), stat.version
        except NoNodeError:
            try:
                await meta.create(NODE_ID_COUNTER, str(FIRST_AUTO_NODE_ID - 1).encode(), make_parents=True)
            except NodeExistsError:
                pass
            continue
        try:
            await meta.set(NODE_ID_COUNTER, str(last + 1).encode(), version)
        except BadVersionError:
            continue
        break
    try:
        await meta.create(key, str(last + 1).encode(), make_parents=True)
        return last + 1
    except NodeExistsError:  # another process registered this address concurrently
        data, _ = await meta.get(key)
        return int(data)


class NodeIdInUseError(RuntimeError):
    """Another live gateway is registered under this node id."""


class ClusterView:
    """The live gateways and partition leases, followed through metadata-store watches."""

    def __init__(self, meta: MetaStore, self_node: GatewayNode, topics: TopicRegistry | None = None) -> None:
        self.meta = meta
        self.self_node = self_node
        self.node_id = self_node.node_id
        self.topics = topics
        self.cluster_id = ""
        self._nodes: dict[int, GatewayNode] = {}
        self._sorted: list[GatewayNode] = []
        # topic id -> partition -> owner node id; and the leader epoch each owner published
        self._owners: dict[uuid.UUID, dict[int, int]] = {}
        self._epochs: dict[tuple[uuid.UUID, int], int] = {}
        self._epoch_watched: set[tuple[uuid.UUID, int]] = set()
        # Lease reads are numbered as issued; one is applied only if no later-issued read of
        # the same lease was applied first (a slow read must not undo a newer epoch).
        self._lease_reads = 0
        self._lease_applied: dict[tuple[uuid.UUID, int], int] = {}
        self._followed_topics: set[str] = set()
        self._listeners: list[Callable[[], None]] = []
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._gateways_loaded = asyncio.Event()
        self._owners_loaded = asyncio.Event()
        self._registered = False

    # -- what the gateway asks ------------------------------------------------------------------

    def gateways(self) -> list[GatewayNode]:
        """Live gateways sorted by node id."""
        return list(self._sorted)

    def live_ids(self) -> list[int]:
        return [n.node_id for n in self._sorted]

    def node(self, node_id: int) -> GatewayNode | None:
        return self._nodes.get(node_id)

    @property
    def controller_id(self) -> int:
        return self._sorted[0].node_id if self._sorted else self.node_id

    def leader_of(self, topic_id: uuid.UUID, partition: int) -> int | None:
        return self._owners.get(topic_id, {}).get(partition)

    def leader_epoch_of(self, topic_id: uuid.UUID, partition: int) -> int:
        """The leader epoch the owner published in its lease (-1 while unknown, e.g. while the
        owner is still opening the partition)."""
        if self.leader_of(topic_id, partition) is None:
            return -1
        return self._epochs.get((topic_id, partition), -1)

    def owners(self, topic_id: uuid.UUID) -> dict[int, int]:
        """partition -> owner node id, for the partitions with a lease."""
        return dict(self._owners.get(topic_id, {}))

    def add_listener(self, cb: Callable[[], None]) -> None:
        """Called (on the event loop, must not block) after live gateways or leases change."""
        self._listeners.append(cb)

    def note_owner(
        self, topic_id: uuid.UUID, partition: int, node_id: int | None, leader_epoch: int = -1
    ) -> None:
        """Record a lease change this gateway made itself, before its watch reports it."""
        owners = self._owners.setdefault(topic_id, {})
        if node_id is None:
            owners.pop(partition, None)
            self._epochs.pop((topic_id, partition), None)
        else:
            owners[partition] = node_id
            self._epochs[(topic_id, partition)] = leader_epoch

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, *, register: bool = True, register_wait: float = 30.0) -> None:
        self.cluster_id = await ensure_cluster_id(self.meta)
        if register:
            await self._register(register_wait)
        self._spawn(follow_children(self.meta, paths.GATEWAYS, self._on_gateways, stop=self._stop))
        self._spawn(follow_children(self.meta, paths.OWNERS, self._on_owner_topics, stop=self._stop))
        await self._gateways_loaded.wait()
        await self._owners_loaded.wait()

    async def close(self) -> None:
        """Stop following and deregister (after the PartitionManager released its leases)."""
        self._stop.set()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._registered:
            self._registered = False
            with contextlib.suppress(Exception):
                stat = await self.meta.exists(paths.gateway(self.node_id))
                if stat is not None and stat.ephemeral_owner == self.meta.session_id:
                    await self.meta.delete(paths.gateway(self.node_id), stat.version)

    # -- internals ------------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("cluster view: %s failed", task.get_coro(), exc_info=exc)

    def _notify(self) -> None:
        for cb in list(self._listeners):
            try:
                cb()
            except Exception:
                log.exception("cluster listener %r failed", cb)

    async def _register(self, wait_limit: float) -> None:
        path = paths.gateway(self.node_id)
        data = self.self_node.to_bytes()
        deadline = time.monotonic() + wait_limit
        while True:
            try:
                await self.meta.create(path, data, ephemeral=True, make_parents=True)
                self._registered = True
                return
            except NodeExistsError:
                pass
            try:
                raw, stat = await self.meta.get(path)
            except NoNodeError:
                continue
            if stat.ephemeral_owner == self.meta.session_id:
                self._registered = True
                return
            other = GatewayNode.from_bytes(raw)
            if (other.host, other.port) == (self.self_node.host, self.self_node.port):
                # Our own previous incarnation (killed; its session not reaped yet): nothing else
                # can be serving our address now, so its registration is stale.
                log.info(
                    "removing stale registration of node %d (session %#x)", self.node_id, stat.ephemeral_owner
                )
                with contextlib.suppress(NoNodeError, BadVersionError):
                    await self.meta.delete(path, stat.version)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise NodeIdInUseError(
                    f"node id {self.node_id} is registered by a live gateway at {other.host}:{other.port}"
                )
            gone = asyncio.Event()

            def on_event(_: WatchEvent, gone: asyncio.Event = gone) -> None:
                gone.set()

            if await self.meta.exists(path, watch=on_event) is not None:
                with contextlib.suppress(TimeoutError):
                    await within(gone.wait(), min(left, 1.0))

    async def _on_gateways(self, kids: list[str]) -> None:
        live: dict[int, GatewayNode] = {}
        for name in kids:
            try:
                nid = int(name)
            except ValueError:
                continue
            node = self._nodes.get(nid)
            if node is None:
                try:
                    raw, _ = await self.meta.get(paths.gateway(nid))
                except NoNodeError:
                    continue
                node = GatewayNode.from_bytes(raw)
            live[nid] = node
        changed = live.keys() != self._nodes.keys()
        self._nodes = live
        self._sorted = [live[k] for k in sorted(live)]
        self._gateways_loaded.set()
        if changed:
            log.info("live gateways: %s", sorted(live))
            self._notify()

    async def _on_owner_topics(self, kids: list[str]) -> None:
        for name in kids:
            if name in self._followed_topics:
                continue
            try:
                tid = uuid.UUID(hex=name)
            except ValueError:
                continue
            self._followed_topics.add(name)
            loaded = asyncio.Event()
            self._spawn(
                follow_children(
                    self.meta, f"{paths.OWNERS}/{name}", self._lease_handler(tid, loaded), stop=self._stop
                )
            )
            if not self._owners_loaded.is_set():
                # Startup: have every existing lease in memory before start() returns.
                with contextlib.suppress(TimeoutError):
                    await within(loaded.wait(), 10.0)
        self._owners_loaded.set()

    def _lease_handler(self, tid: uuid.UUID, loaded: asyncio.Event) -> Callable[[list[str]], Awaitable[None]]:
        async def handle(parts: list[str]) -> None:
            await self._on_leases(tid, parts, loaded)

        return handle

    async def _read_lease(self, tid: uuid.UUID, partition: int) -> tuple[int, tuple[int, int] | None]:
        """(read number, (owner, leader epoch) or None) of a lease, watching it for the epoch its
        owner publishes."""
        key = (tid, partition)
        self._lease_reads += 1
        ticket = self._lease_reads
        watch = None
        if key not in self._epoch_watched:
            self._epoch_watched.add(key)

            def watch(event: WatchEvent) -> None:
                self._epoch_watched.discard(key)
                # A lost session stops the gateway (every read would fail): nothing to re-read.
                if event.type is not EventType.SESSION_LOST and not self._stop.is_set():
                    self._spawn(self._reload_lease(tid, partition))

        try:
            raw, _ = await self.meta.get(f"{paths.OWNERS}/{tid.hex}/{partition}", watch=watch)
        except NoNodeError:
            self._epoch_watched.discard(key)
            return ticket, None
        except MetaError:
            self._epoch_watched.discard(key)  # no watch set: the next read sets one
            raise
        doc = json.loads(raw)
        return ticket, (int(doc["node_id"]), int(doc.get("leader_epoch", -1)))

    def _apply_lease(self, tid: uuid.UUID, partition: int, ticket: int, lease: tuple[int, int] | None) -> None:
        key = (tid, partition)
        if ticket < self._lease_applied.get(key, 0):
            return  # issued before a read already applied: older news
        self._lease_applied[key] = ticket
        owners = self._owners.setdefault(tid, {})
        if lease is None:
            owners.pop(partition, None)
            self._epochs.pop(key, None)
        else:
            owners[partition], self._epochs[key] = lease

    def _lease_state(self, tid: uuid.UUID) -> tuple[dict[int, int], dict[int, int]]:
        return dict(self._owners.get(tid, {})), {p: e for (t, p), e in self._epochs.items() if t == tid}

    async def _reload_lease(self, tid: uuid.UUID, partition: int) -> None:
        """Re-read a lease whose watch fired. Connection trouble is retried (the store reconnects
        by itself); a lost session ends it quietly (the gateway stops, saying why)."""
        retry = Retry(RETRY_BACKOFF)
        while True:
            try:
                ticket, lease = await self._read_lease(tid, partition)
                break
            except SessionExpiredError:
                return
            except MetaError as e:
                log.info("re-reading the lease of %s-%d: %s", tid, partition, e)
                await retry.pause()
                if self._stop.is_set():
                    return
        before = self._lease_state(tid)
        self._apply_lease(tid, partition, ticket, lease)
        if before != self._lease_state(tid):
            self._notify()

    async def _on_leases(self, tid: uuid.UUID, parts: list[str], loaded: asyncio.Event) -> None:
        read: dict[int, tuple[int, tuple[int, int] | None]] = {}

        async def one(name: str) -> None:
            try:
                read[int(name)] = await self._read_lease(tid, int(name))
            except (ValueError, KeyError):
                return

        await asyncio.gather(*(one(n) for n in parts))
        before = self._lease_state(tid)
        for p in before[0].keys() - read.keys():
            # Not listed: gone (a lease created since re-fires the children watch).
            self._apply_lease(tid, p, self._lease_reads, None)
        for p, (ticket, lease) in read.items():
            self._apply_lease(tid, p, ticket, lease)
        loaded.set()
        if before != self._lease_state(tid):
            self._notify()
