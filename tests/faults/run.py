"""One fault run: start the cluster, run the workload under the nemesis for a while, heal, wait
for full replication, read everything back and check it. Used by tests/faults/test_chaos.py
and bench/chaos.py."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.checker import Verdict, check, unavailable_seconds
from tests.faults.harness import Cluster, ClusterConfig, log
from tests.faults.nemesis import Nemesis
from tests.faults.workload import Workload, create_topic, read_back

TOPIC = "chaos"
PARTITIONS = 12


@dataclass
class Result:
    seed: int
    messages: int = 0  # acknowledged
    sent: int = 0
    failed: int = 0  # delivery failures reported to the producers
    faults: int = 0
    unavailable_s: int = 0
    rereplicated_mb: float = 0.0
    full_replication_s: float | None = None  # None: not within the bound
    replication_bound_s: float = 0.0
    restarts: int = 0
    verdict: Verdict = field(default_factory=Verdict)
    anomalies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.anomalies and self.full_replication_s is not None

    def bench_line(self) -> str:
        v = self.verdict
        full = -1 if self.full_replication_s is None else round(self.full_replication_s, 1)
        return (f"BENCH chaos messages={self.messages} faults={self.faults} lost={v.lost} "
                f"duplicated={v.duplicated} reordered={v.reordered} unavailable_s={self.unavailable_s} "
                f"rereplicated_MB={self.rereplicated_mb:.1f} full_replication_s={full}")


async def wait_full_replication(nemesis: Nemesis, bound_s: float) -> float | None:
    """Seconds until every ledger is fully replicated (Nemesis.replicated); None if not within
    bound_s."""
    start = time.monotonic()
    last = ""
    while time.monotonic() - start < bound_s:
        try:
            ok, now = await nemesis.replicated()
        except Exception as e:  # ZooKeeper reconnecting: ask again
            ok, now = False, repr(e)
        if ok:
            return time.monotonic() - start
        if now != last:
            log(f"replication: {now}")
            last = now
        await asyncio.sleep(1.0)
    return None


async def run_chaos(base: Path, *, minutes: float, seed: int, rate: float,
                    replication_bound_s: float = 180.0, config: ClusterConfig | None = None,
                    only: frozenset[str] = frozenset()) -> Result:
    result = Result(seed=seed, replication_bound_s=replication_bound_s)
    log(f"chaos: seed {seed}, {minutes} min of faults, {rate:.0f} messages/s, data under {base}")
    cluster = Cluster(base, config)
    workload: Workload | None = None
    try:
        await cluster.start()
        await asyncio.to_thread(create_topic, cluster.bootstrap, TOPIC, PARTITIONS)
        workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS, rate=rate)
        workload.start()
        t0 = time.monotonic()
        while workload.acked < PARTITIONS * 10:
            if time.monotonic() - t0 > 120:
                raise AssertionError("no traffic within 120 s of the start")
            await asyncio.sleep(0.2)
        log(f"traffic flowing ({workload.acked} acked)")
        nemesis = Nemesis(cluster, random.Random(seed), only=only)
        faults_start = time.monotonic()
        progress = asyncio.create_task(_progress(workload, nemesis))
        try:
            await nemesis.run(faults_start + minutes * 60)
        finally:
            await nemesis.heal()
            progress.cancel()
        healed = time.monotonic()
        log(f"faults over ({nemesis.faults}); producing 5 s more on the healed cluster")
        await asyncio.sleep(5.0)
        await asyncio.to_thread(workload.stop_producers)
        stopped = time.monotonic()
        result.full_replication_s = await wait_full_replication(
            nemesis, max(replication_bound_s - (time.monotonic() - healed), 0.0))
        if result.full_replication_s is not None:
            result.full_replication_s += stopped - healed
        log(f"fully replicated after the faults: {result.full_replication_s} s (bound {replication_bound_s} s)")
        await asyncio.sleep(3.0)  # the group's last auto-commit
        await asyncio.to_thread(workload.stop_consumers)
        read = await asyncio.to_thread(read_back, cluster.bootstrap, TOPIC, PARTITIONS)
        result.verdict = check(workload.acks, read, workload.commit_regressions)
        result.messages = result.verdict.acked
        result.sent = workload.sent
        result.failed = workload.failed
        result.faults = nemesis.faults
        result.unavailable_s = unavailable_seconds(workload.acks, faults_start, stopped)
        stats = await cluster.recovery_stats()
        result.rereplicated_mb = int(str(stats.get("bytes_rereplicated", 0))) / 1e6
        result.restarts = cluster.restarts
        result.anomalies = list(nemesis.anomalies)
        if workload.in_flight_left:
            result.anomalies.append(f"{workload.in_flight_left} messages still unacknowledged after a 300 s flush")
        if result.full_replication_s is None:
            result.anomalies.append(f"not fully replicated within {replication_bound_s} s of the faults' end")
        _report(result, workload, nemesis, cluster)
        return result
    finally:
        if workload is not None:
            workload.stop_producing.set()
            workload.stop_consuming.set()
        await cluster.close()


async def _progress(workload: Workload, nemesis: Nemesis) -> None:
    while True:
        await asyncio.sleep(30.0)
        log(f"progress: sent {workload.sent} acked {workload.acked} failed {workload.failed} "
            f"consumed {workload.consumed} faults {nemesis.faults}")


def _report(r: Result, w: Workload, n: Nemesis, c: Cluster) -> None:
    v = r.verdict
    faults: dict[str, int] = {}
    for e in n.events:
        faults[e.fault] = faults.get(e.fault, 0) + 1
    print(f"seed: {r.seed}")
    print(f"faults: {r.faults} " + " ".join(f"{k}={faults[k]}" for k in sorted(faults)))
    print(f"messages: sent {r.sent}, acknowledged {v.acked}, read back {v.read}, delivery failures {r.failed}"
          + (f" {w.failures}" if w.failures else ""))
    print(f"group: consumed {w.consumed}, committed {sum(w.committed.values())}, consumer errors "
          f"{sum(w.consumer_errors.values())}")
    print(f"checker: lost {v.lost}, duplicated {v.duplicated}, reordered {v.reordered}, gaps {v.gaps}, "
          f"committed offsets moved backwards {v.commit_regressions}, acknowledged without an offset {v.no_offset}")
    for example in v.examples:
        print(f"  {example}")
    print(f"unavailable: {r.unavailable_s} s (seconds in which some partition got no acknowledgement)")
    print(f"supervisor restarts: {r.restarts} " + ", ".join(
        f"{p.name} exited {p.exits}" for p in c.bookies + c.gateways if p.exits))
    print(f"re-replicated: {r.rereplicated_mb:.1f} MB; fully replicated {r.full_replication_s} s after the "
          f"faults ended (bound {r.replication_bound_s:.0f} s)")
    for a in r.anomalies:
        print(f"ANOMALY: {a}")
