"""The gateway's log cleaner (Kafka's LogCleaner, one thread): compacts the owned partitions of
topics whose cleanup.policy includes compact, one pass at a time, off the append path.

A partition is looked at when one of its ledgers closes (rollover) and every
log.cleaner.backoff.ms; what a pass does is kafka_log/compaction.py's. Reads and writes of a
pass are throttled to log.cleaner.io.max.bytes.per.second (default: unbounded, as Kafka)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from gateway.config import CleanerSettings
from gateway.metrics import CLEANER_CLEAN_TIME, CLEANER_LEDGERS, CLEANER_PASSES
from kafka_log.compaction import CleanerPolicy, clean
from store.managed.errors import ManagedLogError
from store.tasks import cancel_and_wait, within

if TYPE_CHECKING:
    from gateway.partition.log import PartitionLog
    from gateway.topics.registry import TopicInfo

log = logging.getLogger(__name__)


def policy_of(topic: TopicInfo) -> CleanerPolicy:
    return CleanerPolicy(
        min_dirty_ratio=float(topic.config("min.cleanable.dirty.ratio")),
        min_lag_ms=topic.config_int("min.compaction.lag.ms"),
        max_lag_ms=topic.config_int("max.compaction.lag.ms"),
        delete_retention_ms=topic.config_int("delete.retention.ms"),
    )


class LogCleaner:
    def __init__(self, settings: CleanerSettings | None = None) -> None:
        self.settings = settings or CleanerSettings()
        self._logs: set[PartitionLog] = set()
        self._due: list[PartitionLog] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.passes = 0  # passes that rewrote ledgers
        self.rewritten = 0  # ledgers rewritten

    def attach(self, plog: PartitionLog) -> None:
        if not self.settings.enable:
            return
        self._logs.add(plog)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def detach(self, plog: PartitionLog) -> None:
        self._logs.discard(plog)

    def schedule(self, plog: PartitionLog) -> None:
        """Look at this partition soon (one of its ledgers closed)."""
        if plog in self._logs and plog.topic.compacted and plog not in self._due:
            self._due.append(plog)
            self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), self.settings.backoff_ms / 1000)
            self._wake.clear()
            due, self._due = self._due, []
            for plog in due or [p for p in list(self._logs) if p.topic.compacted]:
                await self.clean_once(plog)

    async def clean_once(self, plog: PartitionLog) -> list[int]:
        """One pass over one partition (the ledgers it rewrote)."""
        if plog not in self._logs or not plog.serving:
            return []
        started = time.monotonic()
        try:
            done = await clean(
                plog.ml, policy_of(plog.topic), now=int(time.time() * 1000), lso=plog.last_stable_offset,
                aborted=[t for _, t in plog.view.aborted.entries()],
                map_bytes=self.settings.dedupe_buffer_bytes, throttle=self._throttle,
                aborts_gone=plog.view.aborted.remove,
            )
        except ManagedLogError as e:  # ownership lost, or a ledger trimmed or offloaded meanwhile
            log.info("cleaner: %r: pass abandoned: %r", plog, e)
            return []
        except Exception:
            log.exception("cleaner: %r: pass failed", plog)
            return []
        if done:
            self.passes += 1
            self.rewritten += len(done)
            CLEANER_PASSES.inc()
            CLEANER_LEDGERS.inc(len(done))
            CLEANER_CLEAN_TIME.set(time.monotonic() - started)
            log.info("cleaner: %r: compacted ledgers %s", plog, done)
        return done

    async def _throttle(self, nbytes: int) -> None:
        rate = self.settings.io_max_bytes_per_s
        if rate < 1e300:
            await asyncio.sleep(2 * nbytes / rate)  # read once and written once
