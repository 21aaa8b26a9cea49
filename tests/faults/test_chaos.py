"""The issue's fault run in the suite: 2 minutes of seeded faults against ZooKeeper, 5 bookies
and 3 gateways under an idempotent acks=all workload on 12 partitions with a consumer group;
nothing acknowledged is lost, duplicated or reordered, committed offsets never move backwards,
and every ledger is fully replicated within a bound once the faults stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.run import run_chaos

pytestmark = pytest.mark.slow

SEED = 20261124
MINUTES = 2.0
REPLICATION_BOUND_S = 120.0


@pytest.mark.timeout(600)
async def test_chaos_two_minutes(zookeeper: object, tmp_path: Path) -> None:
    # `zookeeper` only for its skip when java or Debian's zookeeper is missing: the run starts
    # its own server, which the nemesis kills.
    result = await run_chaos(tmp_path / "cluster", minutes=MINUTES, seed=SEED, rate=300.0,
                             replication_bound_s=REPLICATION_BOUND_S)
    print(result.bench_line())
    v = result.verdict
    assert v.acked > 10_000, result.bench_line()
    assert result.faults >= 8, result.bench_line()
    assert (v.lost, v.duplicated, v.reordered, v.gaps, v.commit_regressions) == (0, 0, 0, 0, 0), v.examples
    assert result.full_replication_s is not None, f"not fully replicated within {REPLICATION_BOUND_S} s"
    assert not result.anomalies, result.anomalies
