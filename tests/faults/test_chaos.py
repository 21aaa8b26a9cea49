"""The issue's fault run in the suite: 2 minutes of seeded faults against ZooKeeper, 5 bookies
and 3 gateways under an idempotent acks=all workload on 12 partitions with a consumer group;
nothing acknowledged is lost, duplicated or reordered, committed offsets never move backwards,
and every ledger is fully replicated within a bound once the faults stop."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.faults.run import run_chaos
from tests.support.zookeeper import ZK_JAR

pytestmark = pytest.mark.slow

SEED = 20261124
MINUTES = 2.0
REPLICATION_BOUND_S = 120.0


@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("java") is None or not os.path.exists(ZK_JAR),
                    reason="needs java and Debian's zookeeper (apt-get install default-jre-headless zookeeper)")
async def test_chaos_two_minutes(tmp_path: Path) -> None:
    result = await run_chaos(tmp_path / "cluster", minutes=MINUTES, seed=SEED, rate=300.0,
                             replication_bound_s=REPLICATION_BOUND_S)
    print(result.bench_line())
    v = result.verdict
    assert v.acked > 10_000, result.bench_line()
    assert result.faults >= 6, result.bench_line()
    assert (v.lost, v.duplicated, v.reordered, v.gaps, v.commit_regressions) == (0, 0, 0, 0, 0), v.examples
    assert result.full_replication_s is not None, f"not fully replicated within {REPLICATION_BOUND_S} s"
    assert not result.anomalies, result.anomalies
