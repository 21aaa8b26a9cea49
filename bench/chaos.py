"""Jepsen-style fault run against a cluster of real processes on loopback (ZooKeeper, 5 bookies
with E=3/WQ=3/AQ=2, 3 gateways): idempotent acks=all producers on 12 partitions and a consumer
group, under a seeded nemesis (see tests/faults/). Prints the seed, the faults, the checker's
counts, and ends with

BENCH chaos messages=<n> faults=<n> lost=<n> duplicated=<n> reordered=<n> unavailable_s=<n>
            rereplicated_MB=<n> full_replication_s=<n>

Usage: python3 bench/chaos.py [--minutes 20] [--seed N] [--rate 1000] [--dir DIR] [--keep]
                              [--faults kill_bookie,wipe_bookie,...]

With --transactions [--inputs 100000]: instead, the transactional run of tests/faults/txn_run.py
(ZooKeeper, 3 bookies, 2 gateways; a consume-transform-produce loop with random aborts, the owner
of an output partition and the transaction coordinator SIGKILLed mid-transaction), ending with

BENCH txn_chaos inputs=<n> attempts=<n> committed=<n> aborted=<n> unknown=<n> kills=<n> lost=<n>
                duplicated=<n> aborted_leaked=<n> seconds=<n>

Exit code 1 if the checker found an anomaly.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.faults.run import run_chaos  # noqa: E402
from tests.faults.txn_run import run_txn_chaos  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=20.0, help="minutes of faults")
    ap.add_argument("--seed", type=int, default=None, help="nemesis seed (default: random, printed)")
    ap.add_argument("--rate", type=float, default=1000.0, help="messages a second, all producers")
    ap.add_argument("--bound", type=float, default=300.0, help="seconds allowed for full replication")
    ap.add_argument("--dir", type=Path, default=None, help="data and logs (default: a temporary dir)")
    ap.add_argument("--faults", default="", help="comma-separated fault names to choose from (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the data and logs")
    ap.add_argument("--transactions", action="store_true", help="the transactional run instead")
    ap.add_argument("--inputs", type=int, default=100_000, help="input records of the transactional run")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    base = args.dir or Path(tempfile.mkdtemp(prefix="quire-chaos-"))
    print(f"seed: {seed}", flush=True)
    try:
        if args.transactions:
            txn = asyncio.run(run_txn_chaos(base / "cluster", inputs=args.inputs, seed=seed))
            print(txn.bench_line(), flush=True)
            return 0 if txn.ok else 1
        result = asyncio.run(run_chaos(base / "cluster", minutes=args.minutes, seed=seed, rate=args.rate,
                                       replication_bound_s=args.bound,
                                       only=frozenset(f for f in args.faults.split(",") if f)))
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    print(result.bench_line(), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
