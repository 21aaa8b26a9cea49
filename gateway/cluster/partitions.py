"""PartitionManager: opens the partitions this gateway should own, releases the others.

Each gateway computes the same assignment (assignment.py) over the live gateways and takes the
leases (leases.py) of the partitions assigned to it as they become free; partitions assigned
elsewhere are handed over gracefully (close the log, then delete the lease) so that load
rebalances when a gateway joins. When a gateway dies its leases vanish with its session and the
survivors pick its partitions up. A request for a free partition assigned here acquires it on the
spot, so the first produce to a brand-new topic needs no retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gateway import paths
from gateway.cluster import leases
from gateway.cluster.assignment import assign_topic, assigned_node
from gateway.errors import KafkaApiError
from gateway.metrics import LEASES_GAINED, LEASES_LOST
from gateway.partition.log import PartitionLog
from kafka_wire.errors import ErrorCode
from store.clock import SYSTEM_CLOCK, Clock
from store.meta.api import MetaError, MetaStore, NoNodeError, NotEmptyError
from store.metrics import InstanceCollector
from store.retry import Backoff, Retry
from store.tasks import cancel_and_wait, within

if TYPE_CHECKING:
    from gateway.cluster.membership import ClusterView
    from gateway.partition.cleaner import LogCleaner
    from gateway.topics.registry import TopicInfo, TopicRegistry
    from store.ledger.client import LedgerClient
    from store.managed.cache import EntryCache
    from store.offload.offloader import Offloader

log = logging.getLogger(__name__)

Key = tuple[uuid.UUID, int]
LogOpener = Callable[..., Awaitable["PartitionLog"]]

RESYNC_INTERVAL = 5.0  # re-evaluate even without a watch event (a safety net)
# Before a partition is tried again after its open failed (per consecutive failure) or its
# ownership was lost (attempt 0); also after a failed reconciliation pass.
RETRY_BACKOFF = Backoff(initial=1.0, maximum=30.0)
MAX_PARALLEL_OPENS = 8
# How long a starting gateway waits for its first acquisitions before it serves anyway (they
# go on in the background): bookies that are down must not keep it from answering.
SETTLE_TIMEOUT = 10.0


class PartitionManager:
    def __init__(
        self,
        meta: MetaStore,
        ledgers: LedgerClient,
        topics: TopicRegistry,
        cluster: ClusterView,
        node_id: int,
        *,
        cache: EntryCache | None = None,
        replication: tuple[int, int, int] | None = None,
        opener: LogOpener | None = None,
        clock: Clock = SYSTEM_CLOCK,
        offloader: Offloader | None = None,
        cleaner: LogCleaner | None = None,
    ) -> None:
        """replication: (E, WQ, AQ) of new partition ledgers (the gateway's config); opener:
        how a partition log is opened (default PartitionLog.open; tests substitute it)."""
        self._clock = clock
        self.meta = meta
        self.ledgers = ledgers
        self.topics = topics
        self.cluster = cluster
        self.node_id = node_id
        self.cache = cache
        self.replication = replication
        self.offloader = offloader
        self.cleaner = cleaner
        self._open = opener or functools.partial(PartitionLog.open, offloader=offloader, cleaner=cleaner)
        self._logs: dict[Key, PartitionLog] = {}
        self._pending: dict[Key, asyncio.Task[PartitionLog | None]] = {}
        self._releasing: dict[Key, asyncio.Task[None]] = {}
        self._not_before: dict[Key, float] = {}
        self._failures: dict[Key, int] = {}  # consecutive failed opens, for the back-off
        self._dirty = asyncio.Event()
        self._open_slots = asyncio.Semaphore(MAX_PARALLEL_OPENS)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._closed = False
        self._session_lost = False
        PARTITIONS.track(self)

    # -- the gateway's questions ----------------------------------------------------------------

    async def get(self, topic: TopicInfo, partition: int) -> PartitionLog:
        """The open log of a partition this gateway owns (acquiring it now if it is free and
        assigned here); NOT_LEADER_OR_FOLLOWER if another gateway owns or should own it."""
        if not 0 <= partition < topic.partitions:
            raise KafkaApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic.name}-{partition} does not exist"
            )
        key = (topic.topic_id, partition)
        found = self._logs.get(key)
        if found is not None:
            return found
        if self._closed or self._session_lost:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "gateway is shutting down")
        pending = self._pending.get(key)
        if pending is not None:
            with contextlib.suppress(Exception):
                found = await asyncio.shield(pending)
            if found is not None:
                return found
        holder = self.cluster.leader_of(topic.topic_id, partition)
        if holder is not None and holder != self.node_id:
            raise KafkaApiError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic.name}-{partition} is led by {holder}"
            )
        if holder is None:
            assigned = assigned_node(topic.topic_id, topic.partitions, partition, self.cluster.live_ids(),
                                     topic.preferred)
            if assigned != self.node_id:
                raise KafkaApiError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic.name}-{partition} is assigned to {assigned}"
                )
        if key in self._releasing:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic.name}-{partition} is moving")
        try:
            found = await self._acquire(topic, partition)
        except Exception as e:
            raise KafkaApiError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"cannot open {topic.name}-{partition}: {e}"
            ) from e
        if found is None:
            raise KafkaApiError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic.name}-{partition} is owned elsewhere"
            )
        return found

    def owned(self) -> list[Key]:
        """(topic id, partition) of every partition open here."""
        return sorted(self._logs)

    def log_of(self, topic_id: uuid.UUID, partition: int) -> PartitionLog | None:
        return self._logs.get((topic_id, partition))

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self.cluster.add_listener(self._kick)
        self.topics.add_listener(self._kick)
        self.meta.add_session_listener(self._on_session_lost)
        self._loop_task = asyncio.get_running_loop().create_task(self._run())
        self._kick()

    async def close(self) -> None:
        """Close every log cleanly, then release its lease."""
        self._closed = True
        await cancel_and_wait([self._loop_task])
        for t in list(self._pending.values()):
            with contextlib.suppress(Exception):
                await t
        await asyncio.gather(*(self._release(k) for k in list(self._logs)), return_exceptions=True)
        await asyncio.gather(*list(self._releasing.values()), return_exceptions=True)
        for t in list(self._tasks):
            t.cancel()

    async def reconcile(self) -> None:
        """One evaluation pass, waiting for the acquisitions and hand-overs it starts."""
        await self._reconcile(wait=True)

    async def settle(self, within: float = SETTLE_TIMEOUT) -> int:
        """Open the free partitions assigned here before the gateway serves, as a Kafka broker
        enables request processing only once it leads its partitions: a client's first Metadata
        after a restart then names a leader for each, where it would otherwise get
        LEADER_NOT_AVAILABLE (which librdkafka's watermark query does not retry). Waits at most
        `within` seconds; returns how many were still opening then."""
        await self._reconcile(wait=False)
        await asyncio.sleep(0)  # the acquisitions it (and the background pass) spawned register as pending
        if self._pending:
            await asyncio.wait(list(self._pending.values()), timeout=within)
        return sum(1 for t in self._pending.values() if not t.done())  # one per partition

    # -- internals ------------------------------------------------------------------------------

    def _kick(self) -> None:
        self._dirty.set()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self) -> None:
        retry = Retry(RETRY_BACKOFF, clock=self._clock)
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await within(self._dirty.wait(), RESYNC_INTERVAL)
            self._dirty.clear()
            if self._session_lost:
                return
            try:
                await self._reconcile(wait=False)
                retry.reset()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("partition reconciliation failed")
                await retry.pause()
                self._kick()

    async def _reconcile(self, *, wait: bool) -> None:
        topics = await self.topics.all()
        live = self.cluster.live_ids()
        wanted: dict[Key, TopicInfo] = {}
        if self.node_id in live:
            for t in topics:
                for p, n in enumerate(assign_topic(t.topic_id, t.partitions, live, t.preferred)):
                    if n == self.node_id:
                        wanted[(t.topic_id, p)] = t
        present = {t.topic_id for t in topics}
        started: list[asyncio.Task[Any]] = []
        for key in list(self._logs):
            if key in wanted or key in self._releasing:
                continue
            deleted = key[0] not in present
            if deleted and await self.topics.get_by_id(key[0]) is not None:
                # Our topic cache has not seen a topic just created elsewhere (a partition is
                # served on its first request before the watch): it is not deleted, and this
                # stale pass must neither delete nor hand it over (get_by_id caches it now).
                continue
            if not deleted and self.node_id not in live:
                continue  # not registered (yet): keep serving what we hold
            started.append(self._start_release(key, delete=deleted))
        now = self._clock.monotonic()
        for key, t in wanted.items():
            if key in self._logs or key in self._pending or key in self._releasing:
                continue
            if self._not_before.get(key, 0.0) > now:
                self._spawn(self._kick_later(self._not_before[key] - now))
                continue
            if self.cluster.leader_of(*key) not in (None, self.node_id):
                continue  # the current owner hands it over when it sees the new assignment
            started.append(self._spawn(self._acquire_quietly(t, key[1])))
        if wait and started:
            await asyncio.gather(*started, return_exceptions=True)

    async def _kick_later(self, delay: float) -> None:
        await self._clock.sleep(delay)
        self._kick()

    async def _acquire_quietly(self, topic: TopicInfo, partition: int) -> None:
        with contextlib.suppress(Exception):  # logged by _do_acquire, retried after a back-off
            await self._acquire(topic, partition)

    async def _acquire(self, topic: TopicInfo, partition: int) -> PartitionLog | None:
        key = (topic.topic_id, partition)
        found = self._logs.get(key)
        if found is not None:
            return found
        task = self._pending.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._do_acquire(topic, partition))
            self._pending[key] = task
            task.add_done_callback(lambda t: self._acquired(key, t))
        return await asyncio.shield(task)

    def _acquired(self, key: Key, task: asyncio.Task[PartitionLog | None]) -> None:
        self._pending.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved: a failure was logged, and waiters got it

    async def _do_acquire(self, topic: TopicInfo, partition: int) -> PartitionLog | None:
        key = (topic.topic_id, partition)
        async with self._open_slots:
            if self._closed or self._session_lost:
                return None
            if not await leases.try_acquire(self.meta, topic.topic_id, partition, self.node_id):
                return None
            self.cluster.note_owner(topic.topic_id, partition, self.node_id)
            try:
                opened = await self._open(
                    self.meta, self.ledgers, topic, partition, cache=self.cache, replication=self.replication
                )
            except BaseException as e:
                failures = self._failures.get(key, 0)
                self._failures[key] = failures + 1
                log.warning(
                    "opening %s-%d failed (attempt %d): %r",
                    topic.name,
                    partition,
                    failures + 1,
                    e,
                    exc_info=failures == 0,
                )
                self._not_before[key] = self._clock.monotonic() + RETRY_BACKOFF.delay(failures)
                with contextlib.suppress(MetaError):
                    await leases.release(self.meta, topic.topic_id, partition)
                self.cluster.note_owner(topic.topic_id, partition, None)
                self._kick()  # retried once the back-off has passed
                raise
        self._not_before.pop(key, None)
        self._failures.pop(key, None)
        self._logs[key] = opened
        LEASES_GAINED.inc()
        self.cluster.note_owner(topic.topic_id, partition, self.node_id, opened.leader_epoch)
        opened.add_lost_listener(lambda: self._on_lost(key, opened))
        log.info(
            "node %d now owns %s-%d (leader epoch %s)",
            self.node_id,
            topic.name,
            partition,
            opened.leader_epoch,
            extra={"fields": {"event": "lease_gained", "node": self.node_id, "topic": topic.name,
                              "partition": partition, "leader_epoch": opened.leader_epoch}},
        )
        if self._closed:
            await self._release(key)
            return None
        with contextlib.suppress(MetaError):
            await leases.publish_epoch(
                self.meta, topic.topic_id, partition, self.node_id, opened.leader_epoch
            )
        return opened

    def _start_release(self, key: Key, *, delete: bool = False) -> asyncio.Task[None]:
        task = self._releasing.get(key)
        if task is None:
            task = self._spawn(self._release(key, delete=delete))
            self._releasing[key] = task
            task.add_done_callback(lambda _: self._releasing.pop(key, None))
        return task

    async def _release(self, key: Key, *, delete: bool = False) -> None:
        """Hand a partition over: close (or, for a deleted topic, delete) the log, then the lease."""
        opened = self._logs.pop(key, None)
        if opened is not None:
            try:
                await (opened.delete() if delete else opened.close())
            except Exception:
                log.exception("closing partition %s-%d failed", key[0], key[1])
        with contextlib.suppress(MetaError):
            await leases.release(self.meta, key[0], key[1])
        self.cluster.note_owner(key[0], key[1], None)
        self._kick()  # our own change: the lease watch will not report a difference
        if delete:
            # The last lease of a deleted topic takes its lease folder with it.
            with contextlib.suppress(NoNodeError, NotEmptyError, MetaError):
                await self.meta.delete(f"{paths.OWNERS}/{key[0].hex}")
        else:
            log.info("node %d handed over partition %s-%d", self.node_id, key[0], key[1],
                     extra={"fields": {"event": "lease_released", "node": self.node_id, "topic_id": key[0].hex,
                                       "partition": key[1]}})

    def _on_lost(self, key: Key, lost: PartitionLog) -> None:
        """The log was fenced by another owner (or failed): drop it and re-evaluate later."""
        if self._logs.get(key) is not lost:
            return
        log.warning("node %d lost ownership of %s-%d", self.node_id, key[0], key[1],
                    extra={"fields": {"event": "lease_lost", "node": self.node_id, "topic_id": key[0].hex,
                                      "partition": key[1]}})
        LEASES_LOST.inc()
        self._not_before[key] = self._clock.monotonic() + RETRY_BACKOFF.delay(0)
        self._start_release(key)
        self._kick()

    def _on_session_lost(self) -> None:
        """Our leases are gone with the session: stop serving every partition at once."""
        self._session_lost = True
        LEASES_LOST.inc(len(self._logs))
        for key in list(self._logs):
            self._start_release(key)


def _partition_metrics(managers: list[PartitionManager]) -> Iterator[Metric]:
    owned = sum(len(m.owned()) for m in managers)
    # Every partition a gateway serves, it leads (no followers: the bookies replicate).
    for name, what in (("partitioncount", "Partitions owned"), ("leadercount", "Partitions led")):
        family = GaugeMetricFamily(f"kafka_server_replicamanager_{name}", what + " by this gateway")
        family.add_metric([], owned)
        yield family


PARTITIONS: InstanceCollector[PartitionManager] = InstanceCollector(_partition_metrics)
