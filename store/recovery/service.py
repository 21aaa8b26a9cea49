"""Auto-recovery as a service (an auditor candidate plus a replication worker, in a bookie or a
`quire recovery` process), and the operator's views: status, under-replicated ledgers,
decommissioning a bookie."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from store.ledger.env import BookieConns, LedgerEnv
from store.ledger.placement import default_placement
from store.meta.api import MetaStore
from store.recovery import marks
from store.recovery.auditor import Auditor, all_ledgers, current_auditor
from store.recovery.worker import ReplicationWorker, locked_ledgers
from store.retry import Backoff, Retry

log = logging.getLogger(__name__)
_RESTART = Backoff(initial=0.5, maximum=30.0)  # a failed auditor or worker loop starts again


@dataclass
class RecoveryConfig:
    delay_s: float = 30.0  # quire.recovery.delay.s: a missing bookie's grace period
    audit_interval_s: float = 60.0  # quire.recovery.audit.interval.s
    check_interval_s: float = 3600.0  # quire.recovery.check.interval.s: sampled read check
    check_sample: int = 4  # quire.recovery.check.sample: entries read per bookie and fragment
    poll_s: float = 2.0  # how often auditors and workers read the bookies, the auditor node and the marks


def recovery_env(meta: MetaStore, bookies: BookieConns) -> LedgerEnv:
    """What auto-recovery reads and copies ledgers with, in a bookie or a `quire recovery`
    process: the ledger client's shared state without a LedgerClient (whose writer metrics
    those processes would export as forever-zero noise). Timeouts as LedgerClient's defaults."""
    return LedgerEnv(meta=meta, bookies=bookies, placement=default_placement(), add_timeout=2.0, read_timeout=5.0,
                     speculative_read_timeout=0.2)


class AutoRecovery:
    """Runs an auditor candidate and a replication worker until close()."""

    def __init__(self, env: LedgerEnv, node_id: str, config: RecoveryConfig | None = None) -> None:
        cfg = config or RecoveryConfig()
        self.auditor = Auditor(env, node_id, delay_s=cfg.delay_s, interval_s=cfg.audit_interval_s,
                               check_interval_s=cfg.check_interval_s, sample=cfg.check_sample, poll_s=cfg.poll_s)
        self.worker = ReplicationWorker(env, node_id, interval_s=cfg.poll_s)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._guard(self.auditor.run, "auditor")),
                       asyncio.create_task(self._guard(self.worker.run, "replication worker"))]

    @staticmethod
    async def _guard(run: Callable[[], Awaitable[None]], what: str) -> None:
        # A metadata-store hiccup must not end auto-recovery for good: start the loop again.
        retry = Retry(_RESTART)
        while True:
            try:
                await run()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("auto-recovery %s failed, restarting it: %r", what, e)
                await retry.pause()

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []


async def under_replicated(meta: MetaStore) -> list[dict[str, Any]]:
    """One document per marked ledger: bookies, reasons, since when, whether a worker has it."""
    locked = set(await locked_ledgers(meta))
    return [
        {"ledger_id": m.ledger_id, "bookies": m.bookies, "since_ms": m.since_ms, "in_progress": m.ledger_id in locked}
        for m in await marks.list_marks(meta)
    ]


async def status(meta: MetaStore) -> dict[str, Any]:
    stats = await marks.read_stats(meta)
    return {
        "auditor": await current_auditor(meta),
        "under_replicated": len(await marks.marked_ledgers(meta)),
        "in_progress": len(await locked_ledgers(meta)),
        "bytes_rereplicated": int(stats.get("bytes_rereplicated", 0)),
        "entries_rereplicated": int(stats.get("entries_rereplicated", 0)),
        "ledgers_rereplicated": int(stats.get("ledgers_rereplicated", 0)),
        "last_replication_s": stats.get("last_replication_s"),
        "last_check_ms": stats.get("last_check_ms"),
        "decommissioning": sorted(await marks.decommissioned(meta)),
    }


async def ledgers_on(env: LedgerEnv, address: str) -> list[int]:
    return [md.ledger_id for md in await all_ledgers(env) if address in md.bookies()]


async def decommission(env: LedgerEnv, address: str, *, wait_s: float | None = None) -> list[int]:
    """Drain a bookie through auto-recovery: exclude it from placement by workers, mark every
    ledger naming it, then (wait_s) wait until none does. Returns the ledgers still on it."""
    meta = env.meta
    await marks.set_decommissioned(meta, address)
    for lid in await ledgers_on(env, address):
        await marks.mark(meta, lid, {address: (marks.now_ms(), marks.DECOMMISSION)})
    remaining = await ledgers_on(env, address)
    if wait_s is None:
        return remaining
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while remaining and loop.time() < deadline:
        await asyncio.sleep(min(1.0, max(deadline - loop.time(), 0.0)))  # an operator's progress poll
        remaining = await ledgers_on(env, address)
    return remaining  # the bookie stays excluded from re-replication targets until it is removed
