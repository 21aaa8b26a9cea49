"""One transactional fault run: a cluster (ZooKeeper, 3 bookies, 2 gateways), an input topic of
`inputs` records, the consume-transform-produce loop of tests/faults/txn_loop.py with random
aborts, and three SIGKILLs from inside the loop: the gateway owning an output partition (another
than the transaction coordinator when there is one) while a transaction is half produced, the
gateway coordinating the transactional id a few milliseconds into commit_transaction (with luck
between PREPARE_COMMIT and COMPLETE_COMMIT, the survivor finishing the commit), and an output
partition's owner likewise (markers retried to its successor); each restarted once the loop has
committed more input without it. A read_committed reader tails the output throughout; once
the loop is done, fresh read_committed and read_uncommitted readers read it all, and the checker
(tests/faults/txn_checker.py) judges both read_committed views. Used by
tests/faults/test_txn_chaos.py and bench/chaos.py --transactions."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from tests.faults.harness import Cluster, ClusterConfig, Proc, log
from tests.faults.txn_checker import OutRecord, TxnVerdict, check
from tests.faults.txn_loop import TxnLoop, fill_input, high_watermarks, read_output
from tests.faults.workload import create_topic
from tests.support.gateway import RawKafka

INPUT, OUTPUT, PARTITIONS = "txn-in", "txn-out", 4
STALL_S = 180.0  # the loop making no progress this long with a gateway down is a finding


@dataclass
class Kill:
    name: str  # "partition owner" | "transaction coordinator"
    phase: str  # the loop's phase it happens in (TxnLoop.faults)
    after: int  # inputs committed before it
    delay_s: float = 0.0  # after the phase is reached
    victim: Proc | None = None
    detail: str = ""
    at_position: int = 0
    fired: threading.Event = field(default_factory=threading.Event)


@dataclass
class TxnResult:
    seed: int
    inputs: int
    seconds: float = 0.0
    kills: list[str] = field(default_factory=list)
    producers: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    live: TxnVerdict = field(default_factory=TxnVerdict)  # the read_committed reader tailing the run
    final: TxnVerdict = field(default_factory=TxnVerdict)  # a read_committed reader afterwards
    anomalies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.live.ok and self.final.ok and not self.anomalies

    def bench_line(self) -> str:
        v = self.final
        return (f"BENCH txn_chaos inputs={self.inputs} attempts={v.attempts} committed={v.committed} "
                f"aborted={v.aborted} unknown={v.unknown} kills={len(self.kills)} lost={v.lost + self.live.lost} "
                f"duplicated={v.duplicated + self.live.duplicated} "
                f"aborted_leaked={v.aborted_leaked + self.live.aborted_leaked} seconds={self.seconds:.0f}")


def txn_coordinator_port(bootstrap: str, txn_id: str, within: float = 60.0) -> int:
    deadline = time.monotonic() + within
    while True:
        for address in bootstrap.split(","):
            try:
                with RawKafka(address, timeout=5.0) as raw:
                    r: Any = raw.request(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[txn_id]))
                if r.coordinators[0].error_code == 0:
                    return int(r.coordinators[0].port)
            except OSError:
                continue  # that gateway is down
        if time.monotonic() > deadline:
            raise AssertionError(f"no coordinator for {txn_id} within {within} s")
        time.sleep(0.2)


def partition_owner_ports(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2}).list_topics(topic, timeout=30)
    ports = {b.id: b.port for b in md.brokers.values()}
    return {p: ports.get(pm.leader, -1) for p, pm in md.topics[topic].partitions.items()}


async def run_txn_chaos(base: Path, *, inputs: int = 100_000, seed: int, abort_rate: float = 0.2,
                        config: ClusterConfig | None = None) -> TxnResult:
    result = TxnResult(seed=seed, inputs=inputs)
    config = config or ClusterConfig(bookies=3, gateways=2)
    log(f"txn chaos: seed {seed}, {inputs} inputs, abort rate {abort_rate}, data under {base}")
    cluster = Cluster(base, config)
    t0 = time.monotonic()
    try:
        await cluster.start()
        bootstrap = cluster.bootstrap
        for topic in (INPUT, OUTPUT):
            await asyncio.to_thread(create_topic, bootstrap, topic, PARTITIONS)
        await asyncio.to_thread(fill_input, bootstrap, INPUT, PARTITIONS, inputs)
        log(f"input filled: {inputs} records")
        rng = random.Random(seed)
        # The coordinator dies a few milliseconds into commit_transaction: with luck between its
        # PREPARE_COMMIT and COMPLETE_COMMIT records, so that the survivor finishes the commit.
        kills = [Kill("partition owner", "produce", inputs // 4),
                 Kill("transaction coordinator", "commit", inputs // 2, delay_s=rng.uniform(0.002, 0.03)),
                 Kill("partition owner", "commit", inputs * 3 // 4, delay_s=rng.uniform(0.002, 0.03))]
        loop = TxnLoop(bootstrap, INPUT, OUTPUT, PARTITIONS, inputs, seed, abort_rate=abort_rate)

        def killer(k: Kill) -> None:
            victim, k.detail = _victim(cluster, k.name, loop.txn_id)
            k.at_position = loop.position

            def kill() -> None:
                cluster.kill(victim)
                k.victim = victim
                log(f"SIGKILL {victim.name}, the {k.detail}, at {k.at_position} inputs committed "
                    f"(phase {k.phase}{f', {k.delay_s * 1000:.0f} ms in' if k.delay_s else ''})")
                k.fired.set()

            if k.delay_s:  # while the call the loop makes next is under way
                threading.Timer(k.delay_s, kill).start()
            else:
                kill()

        loop.faults = [(k.phase, k.after, functools.partial(killer, k)) for k in kills]
        live_ends: list[dict[int, int]] = []
        live: list[list[list[OutRecord]]] = []
        reader = threading.Thread(target=lambda: live.append(read_output(
            bootstrap, OUTPUT, PARTITIONS, "read_committed", until=lambda: live_ends[0] if live_ends else None,
            timeout=900.0)), name="live-reader", daemon=True)
        runner = threading.Thread(target=loop.run, name="txn-loop", daemon=True)
        reader.start()
        runner.start()
        progress = asyncio.create_task(_progress(loop))
        try:
            for k in kills:
                await _restart_after(cluster, loop, k, restart_after=inputs // 12, anomalies=result.anomalies)
            await asyncio.to_thread(loop.done.wait, 900.0)
        finally:
            progress.cancel()
        if not loop.done.is_set():
            result.anomalies.append(f"the loop did not finish: {loop.position} inputs committed")
        elif loop.failure is not None:
            result.anomalies.append(f"the loop failed: {loop.failure!r}")
        log(f"loop done: {len(loop.attempts)} attempts, {loop.producers} producers, errors {loop.errors}")
        hw = await asyncio.to_thread(high_watermarks, bootstrap, OUTPUT, PARTITIONS)
        live_ends.append(hw)
        final = await asyncio.to_thread(read_output, bootstrap, OUTPUT, PARTITIONS, "read_committed",
                                        until=lambda: hw)
        raw = await asyncio.to_thread(read_output, bootstrap, OUTPUT, PARTITIONS, "read_uncommitted",
                                      until=lambda: hw)
        await asyncio.to_thread(reader.join, 300.0)
        if not live:
            result.anomalies.append("the live read_committed reader did not finish")
            live.append([[] for _ in range(PARTITIONS)])
        result.live = check(inputs, PARTITIONS, loop.attempts, live[0], raw)
        result.final = check(inputs, PARTITIONS, loop.attempts, final, raw)
        result.kills = [f"{k.victim.name} ({k.detail}) at {k.at_position}" for k in kills if k.victim is not None]
        if len(result.kills) != len(kills):
            result.anomalies.append(f"only {len(result.kills)} of {len(kills)} kills happened")
        result.producers = loop.producers
        result.errors = dict(loop.errors)
        result.seconds = time.monotonic() - t0
        if not result.ok:  # the evidence, beside the gateways' logs
            _dump(base / "txn-evidence.json", loop, {"live": live[0], "final": final, "uncommitted": raw})
        _report(result)
        return result
    finally:
        await cluster.close()


def _victim(cluster: Cluster, name: str, txn_id: str) -> tuple[Proc, str]:
    alive = [g for g in cluster.gateways if g.alive]
    bootstrap = ",".join(cluster.gateway(g).address for g in alive)
    by_port = {cluster.gateway(g).port: g for g in alive}
    coordinator = by_port[txn_coordinator_port(bootstrap, txn_id)]
    if name == "transaction coordinator":
        return coordinator, f"coordinator of {txn_id}"
    owners = partition_owner_ports(bootstrap, OUTPUT)
    owning = sorted({p for p in owners.values() if p in by_port}, key=lambda p: by_port[p] is coordinator)
    if not owning:
        raise AssertionError(f"no live owner of {OUTPUT}: {owners}")
    g = by_port[owning[0]]
    parts = sorted(p for p, port in owners.items() if port == owning[0])
    also = " and coordinator" if g is coordinator else ""
    return g, f"owner of {OUTPUT} partitions {parts}{also}"


async def _restart_after(cluster: Cluster, loop: TxnLoop, k: Kill, *, restart_after: int,
                         anomalies: list[str]) -> None:
    """Once `k` fired: restart its victim when the loop committed `restart_after` more inputs
    without it (or finished)."""
    while not k.fired.is_set():
        if loop.done.is_set():
            return
        await asyncio.to_thread(k.fired.wait, 1.0)
    assert k.victim is not None
    last, since = loop.position, time.monotonic()
    while loop.position < k.at_position + restart_after and not loop.done.is_set():
        if loop.position != last:
            last, since = loop.position, time.monotonic()
        elif time.monotonic() - since > STALL_S:
            anomalies.append(f"no progress for {STALL_S:.0f} s after the {k.name} was killed, at {last}")
            break
        await asyncio.to_thread(loop.done.wait, 0.5)
    log(f"restarting {k.victim.name} at {loop.position} inputs committed")
    await cluster.start_proc(k.victim)


def _dump(path: Path, loop: TxnLoop, views: dict[str, list[list[OutRecord]]]) -> None:
    """The loop's attempts and every reader's view, (offset, seq, attempt) per partition."""
    doc = {"attempts": [{"id": a.id, "fate": a.fate.value, "how": a.how, "produced": a.produced} for a in loop.attempts],
           "views": {name: [[[r.offset, r.seq, r.attempt] for r in part] for part in v] for name, v in views.items()}}
    path.write_text(json.dumps(doc))
    log(f"evidence in {path}")


async def _progress(loop: TxnLoop) -> None:
    while True:
        await asyncio.sleep(10.0)
        log(f"progress: {loop.position} inputs committed, {len(loop.attempts)} attempts, errors {loop.errors}")


def _report(r: TxnResult) -> None:
    print(f"seed: {r.seed}; {r.seconds:.0f} s")
    print(f"kills: {r.kills}")
    print(f"producers: {r.producers}; errors seen by the loop: {r.errors}")
    for name, v in (("live read_committed", r.live), ("final read_committed", r.final)):
        print(f"{name}: {v.summary()}")
        for e in v.examples:
            print(f"  {e}")
    for a in r.anomalies:
        print(f"ANOMALY: {a}")
