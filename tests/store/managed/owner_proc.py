"""A segmented-log owner in its own process, for tests that SIGKILL / SIGSTOP it.

python -m tests.store.managed.owner_proc append --meta URL --log NAME
    appends b"<seq>" pipelined (64 in flight), printing "ACK seq ledger entry" per ack;
    prints "LOST" and exits 3 once it lost ownership.
python -m tests.store.managed.owner_proc acks --meta URL --log NAME --state FILE --entries N --acks K
    appends N entries, acks K random ones through cursor "sub" in pipelined batches, writes
    the acknowledged cursor state to FILE (JSON), prints "DONE", then waits to be killed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

from store.ledger.client import LedgerClient
from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.errors import OwnershipLostError
from store.managed.log import ManagedLog
from store.managed.position import Position
from store.meta.factory import open_meta

CONFIG = LogConfig(ensemble_size=3, write_quorum=2, ack_quorum=2, max_entries=40, retention_ms=-1)


def _write(path: str, text: str) -> None:
    Path(path).write_text(text)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def run_append(meta_url: str, name: str) -> int:
    meta = open_meta(meta_url)
    await meta.start()
    client = LedgerClient(meta)
    mlog = await ManagedLog.open(meta, client, name, config=CONFIG, cache=EntryCache())
    say(f"OPEN {mlog.current_ledger_id}")
    lost = asyncio.Event()
    mlog.add_ownership_listener(lambda e: lost.set())
    sem = asyncio.Semaphore(64)
    seq = 0

    def done(s: int, f: asyncio.Future[Position]) -> None:
        sem.release()
        if f.exception() is None:
            p = f.result()
            say(f"ACK {s} {p.ledger_id} {p.entry_id}")

    while not lost.is_set():
        await sem.acquire()
        if lost.is_set():
            break
        fut = mlog.append(str(seq).encode())
        fut.add_done_callback(lambda f, s=seq: done(s, f))  # type: ignore[misc]
        seq += 1
        if seq % 16 == 0:
            await asyncio.sleep(0.002)  # a steady stream, not a flood
    await asyncio.sleep(0.5)  # in flight appends settle
    try:
        await mlog.append(b"after-lost")
    except OwnershipLostError:
        say("LOST")
        return 3
    say("STILL-WRITING")
    return 1


async def run_acks(meta_url: str, name: str, state_file: str, n_entries: int, n_acks: int) -> int:
    meta = open_meta(meta_url)
    await meta.start()
    client = LedgerClient(meta)
    cfg = LogConfig(ensemble_size=3, write_quorum=2, ack_quorum=2, max_entries=50_000, retention_ms=-1)
    mlog = await ManagedLog.open(meta, client, name, config=cfg, cache=EntryCache())
    cur = await mlog.open_cursor("sub", "earliest")
    pos: list[Position] = []
    for i in range(0, n_entries, 2000):
        pos += await asyncio.gather(*(mlog.append(b"e") for _ in range(min(2000, n_entries - i))))
    rng = random.Random(11)
    order = rng.sample(range(n_entries), n_acks)
    step = 500
    for i in range(0, n_acks, step * 8):
        await asyncio.gather(
            *(
                cur.ack([pos[j] for j in order[k : k + step]])
                for k in range(i, min(i + step * 8, n_acks), step)
            )
        )
    await cur.set_properties({"acked": str(n_acks)})
    st = cur.state()
    doc = {"md": list(st.mark_delete), "ranges": st.acked.ranges(), "props": st.props}
    _write(state_file, json.dumps(doc))
    say(f"DONE {len(st.acked)}")
    await asyncio.sleep(3600)
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["append", "acks"])
    p.add_argument("--meta", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--state")
    p.add_argument("--entries", type=int, default=0)
    p.add_argument("--acks", type=int, default=0)
    a = p.parse_args()
    if a.mode == "append":
        return asyncio.run(run_append(a.meta, a.log))
    return asyncio.run(run_acks(a.meta, a.log, a.state, a.entries, a.acks))


if __name__ == "__main__":
    sys.exit(main())
