"""Issue 12's transactional checker on real processes: a consume-transform-produce loop over
100k input records with random aborts, the gateway owning an output partition and the gateway
coordinating the transactions SIGKILLed mid-transaction and restarted (three kills); read_committed
sees every input exactly once, in order, never an aborted record (tests/faults/txn_run.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.faults.txn_run import run_txn_chaos
from tests.support.zookeeper import ZK_JAR

pytestmark = pytest.mark.slow

SEED = 20261124
INPUTS = 100_000


@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("java") is None or not os.path.exists(ZK_JAR),
                    reason="needs java and Debian's zookeeper (apt-get install default-jre-headless zookeeper)")
async def test_transactional_loop_under_kills(tmp_path: Path) -> None:
    result = await run_txn_chaos(tmp_path / "cluster", inputs=INPUTS, seed=SEED)
    print(result.bench_line())
    assert not result.anomalies, result.anomalies
    assert len(result.kills) == 3
    for v in (result.live, result.final):
        assert (v.lost, v.duplicated, v.reordered, v.misplaced, v.aborted_leaked, v.partial,
                v.uncommitted_missing) == (0, 0, 0, 0, 0, 0, 0), v.examples
        assert v.read_committed == INPUTS
    # the run did what it claims: aborts happened, and were (at least in part) written first
    assert result.final.aborted >= 10 and result.final.read_uncommitted > INPUTS
