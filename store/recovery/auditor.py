"""The auditor: one per cluster, elected through an ephemeral node, marks under-replicated ledgers.

Lost bookies: a bookie named by some ledger's fragments but not registered is "missing" from
the first audit that sees it so; once missing for `delay_s` (quire.recovery.delay.s: a restart
should not cost a re-replication), every ledger with a fragment on it is marked. Decommissioned
bookies are marked at once. Audits run when the set of registered bookies changes (read every
`poll_s`), when a grace period ends, and every `interval_s` anyway.

Sampled check (every `check_interval_s`): for every fragment of every ledger (an open ledger's
last fragment excepted: its writer is still adding), read `sample` entries from each live
replica that should hold them and mark the bookie if one is missing or fails its digest (bit
rot, a wiped and re-formatted disk).
"""

from __future__ import annotations

import logging
import math
import random

from store import layout
from store.bookie.entry import EntryDigestError, unpack_entry
from store.bookie.errors import BookieError, DigestMismatchError, NoEntryError, NoLedgerError
from store.clock import SYSTEM_CLOCK, Clock
from store.ledger.env import LedgerEnv
from store.ledger.errors import NoSuchLedgerError
from store.ledger.metadata import LedgerMetadata
from store.ledger.quorum import write_set
from store.meta.api import MetaStore, NodeExistsError, NoNodeError
from store.recovery import marks
from store.recovery.metrics import RECOVERY_METRICS, UNDER_REPLICATED_LEDGERS
from store.tasks import within

log = logging.getLogger(__name__)


async def current_auditor(meta: MetaStore) -> str | None:
    try:
        data, _ = await meta.get(layout.RECOVERY_AUDITOR)
    except NoNodeError:
        return None
    return data.decode()


async def elect(meta: MetaStore, my_id: str, poll_s: float = 2.0, clock: Clock = SYSTEM_CLOCK) -> None:
    """Return once this session holds the auditor node (checks every poll_s while another
    auditor lives: its node goes when its session ends)."""
    while True:
        try:
            await meta.create(layout.RECOVERY_AUDITOR, my_id.encode(), ephemeral=True, make_parents=True)
            return
        except NodeExistsError:
            pass
        stat = await meta.exists(layout.RECOVERY_AUDITOR)
        if stat is not None and stat.ephemeral_owner == meta.session_id:
            return
        if stat is not None:
            await clock.sleep(poll_s)


async def is_auditor(meta: MetaStore) -> bool:
    stat = await meta.exists(layout.RECOVERY_AUDITOR)
    return stat is not None and stat.ephemeral_owner == meta.session_id


async def all_ledgers(env: LedgerEnv) -> list[LedgerMetadata]:
    try:
        names = await env.meta.children(layout.LEDGERS)
    except NoNodeError:
        return []
    out = []
    for n in names:
        try:
            out.append(await env.read_metadata(int(n)))
        except (NoSuchLedgerError, ValueError):
            continue
    return out


class Auditor:
    def __init__(
        self,
        env: LedgerEnv,
        auditor_id: str,
        *,
        delay_s: float,
        interval_s: float = 60.0,
        check_interval_s: float = 3600.0,
        sample: int = 4,
        poll_s: float = 2.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """poll_s: how often the registered bookies (and, for a candidate, the auditor node)
        are read. Polled rather than watched: with a watch always pending, the embedded store
        reads its change log 40 times a second in every bookie."""
        self.env = env
        self.meta = env.meta
        self.auditor_id = auditor_id
        self.delay_s = delay_s
        self.interval_s = interval_s
        self.check_interval_s = check_interval_s
        self.sample = sample
        self.poll_s = poll_s
        self.clock = clock
        RECOVERY_METRICS.register()
        self._missing_since: dict[str, tuple[float, int]] = {}  # address -> (clock, wall ms)
        self._audited_at = -math.inf  # the clock as the last audit_bookies() began
        self._rng = random.Random()

    async def run(self) -> None:
        """Be a candidate; once elected, audit until cancelled (or the session ends)."""
        await elect(self.meta, self.auditor_id, self.poll_s, self.clock)
        log.info("auditor %s elected", self.auditor_id,
                 extra={"fields": {"event": "auditor_elected", "auditor": self.auditor_id}})
        seen: set[str] | None = None
        next_audit = self.clock.monotonic()  # a new auditor audits at once
        # ... and checks when the last auditor's check is check_interval_s old (one check per
        # interval for the cluster, not one per election).
        last_check_ms = (await marks.read_stats(self.meta)).get("last_check_ms", 0)
        next_check = next_audit + max(last_check_ms / 1000 + self.check_interval_s - self.clock.time(), 0.0)
        # When the first grace period under way ends, as of the last audit (which saw it start).
        # Taken then, not at each poll: a poll saw only ends still ahead, so missed the one just
        # passed and left the lost bookie's ledgers to the periodic audit (interval_s later).
        grace_end = math.inf
        while True:
            try:
                alive = set(await self.meta.children(layout.BOOKIES_AVAILABLE))
            except NoNodeError:
                alive = set()
            now = self.clock.monotonic()
            if alive != seen or now >= next_audit or now >= grace_end:
                seen = alive
                marked = await self.audit_bookies()
                if now >= next_check:
                    marked += await self.check_entries()
                    next_check = self.clock.monotonic() + self.check_interval_s
                    await marks.update_stats(self.meta, put={"last_check_ms": int(self.clock.time() * 1000)})
                if marked:
                    log.info("auditor marked %d ledgers under-replicated", marked)
                next_audit = self.clock.monotonic() + self.interval_s
                grace_end = self._next_grace_end()
            UNDER_REPLICATED_LEDGERS.set(len(await marks.marked_ledgers(self.meta)))
            await self.clock.sleep(self.poll_s)

    def _next_grace_end(self) -> float:
        """When the first grace period the last audit found under way ends (inf: none), even
        if that is past by now (an audit is then due at once)."""
        audited = self._audited_at
        ends = [since + self.delay_s for since, _ in self._missing_since.values() if since + self.delay_s > audited]
        return min(ends, default=math.inf)

    async def audit_bookies(self) -> int:
        """Mark ledgers with a fragment on a bookie missing past the grace period (or being
        decommissioned). Returns how many marks changed."""
        try:
            alive = set(await self.meta.children(layout.BOOKIES_AVAILABLE))
        except NoNodeError:
            alive = set()
        leaving = await marks.decommissioned(self.meta)
        now, wall = self.clock.monotonic(), int(self.clock.time() * 1000)
        self._audited_at = now
        ledgers = await all_ledgers(self.env)
        named = {a for md in ledgers for a in md.bookies()}
        for addr in list(self._missing_since):
            if addr in alive or addr not in named:
                del self._missing_since[addr]
        due: dict[str, tuple[int, str]] = {}
        for addr in named - alive:
            since, since_wall = self._missing_since.setdefault(addr, (now, wall))
            if now - since >= self.delay_s:
                due[addr] = (since_wall, marks.LOST)
        for addr in named & leaving:
            due.setdefault(addr, (wall, marks.DECOMMISSION))
        changed = 0
        for md in ledgers:
            hit = {a: v for a, v in due.items() if a in md.bookies()}
            if hit and await marks.mark(self.meta, md.ledger_id, hit):
                changed += 1
                log.info("ledger %d under-replicated: %s", md.ledger_id, sorted(hit),
                         extra={"fields": {"event": "ledger_under_replicated", "ledger": md.ledger_id,
                                           "bookies": sorted(hit)}})
        return changed

    async def check_entries(self) -> int:
        """The sampled read check; returns how many marks changed."""
        try:
            alive = set(await self.meta.children(layout.BOOKIES_AVAILABLE))
        except NoNodeError:
            return 0
        changed = 0
        for md in await all_ledgers(self.env):
            bad: dict[str, tuple[int, str]] = {}
            for i, (first, ensemble) in enumerate(md.ensembles):
                end = md.fragment_end(i)
                if end is None:
                    if not md.is_closed:
                        continue  # the writer's open fragment
                    end = md.last_entry_id
                elif md.is_closed:
                    end = min(end, md.last_entry_id)
                if end < first:
                    continue
                for p, addr in enumerate(ensemble):
                    if addr in alive and addr not in bad and not await self._sample_ok(md, first, end, p, addr):
                        bad[addr] = (int(self.clock.time() * 1000), marks.CHECK)
            if bad and await marks.mark(self.meta, md.ledger_id, bad):
                changed += 1
                log.warning("ledger %d: sampled check found missing or corrupt copies on %s", md.ledger_id,
                            sorted(bad), extra={"fields": {"event": "ledger_check_failed", "ledger": md.ledger_id,
                                                           "bookies": sorted(bad)}})
        return changed

    async def _sample_ok(self, md: LedgerMetadata, first: int, end: int, pos: int, addr: str) -> bool:
        e, wq = md.ensemble_size, md.write_quorum
        picks: set[int] = set()
        for _ in range(self.sample * e):
            if len(picks) >= self.sample:
                break
            x = first + self._rng.randrange(end - first + 1)
            if pos in write_set(x, e, wq):
                picks.add(x)
        for x in range(end, max(first, end - e + 1) - 1, -1):  # and the last entry it holds
            if pos in write_set(x, e, wq):
                picks.add(x)
                break
        for eid in sorted(picks):
            try:
                packed = await within(
                    self.env.bookies.get(addr).read(md.ledger_id, eid), self.env.read_timeout
                )
                unpack_entry(packed, md.ledger_id, eid)
            except (NoEntryError, NoLedgerError, EntryDigestError, DigestMismatchError):
                return False
            except (BookieError, OSError, TimeoutError):
                return True  # unreachable is the lost-bookie path's business, not a bad copy
        return True
