"""Child process for the offload crash tests: take ownership of a log, optionally append
entries across rollovers, then offload every closed ledger (deletion lag 0). With
QUIRE_OFFLOAD_CRASH_AT set it SIGKILLs itself at that step.

    python -m tests.store.offload.offload_proc META_URL LOG SETTINGS_JSON N_ENTRIES
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import sys

from store.ledger.client import LedgerClient
from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.log import ManagedLog
from store.meta.factory import open_meta
from store.offload import OffloadSettings, make_tier
from store.offload.offloader import Offloader

CFG = LogConfig(ensemble_size=3, write_quorum=2, ack_quorum=2, max_entries=30, retention_ms=-1)


def payload(i: int) -> bytes:
    return hashlib.sha256(b"%d" % i).digest() * (10 + i % 40)


async def main(meta_url: str, name: str, settings: str, n: int) -> None:
    meta = open_meta(meta_url)
    await meta.start()
    client = LedgerClient(meta)
    fields = {f.name for f in dataclasses.fields(OffloadSettings)}
    tier = make_tier(OffloadSettings(**{k: v for k, v in json.loads(settings).items() if k in fields}))
    assert tier is not None
    off = Offloader(tier, deletion_lag_ms=0)
    ml = await ManagedLog.open(meta, client, name, config=CFG, cache=EntryCache(), offloader=off)
    if n:
        await asyncio.gather(*(ml.append(payload(i)) for i in range(n)))
        await ml.roll()
    print("PRODUCED", flush=True)
    res = await off.run(ml, force=True)
    print("DONE", json.dumps(dataclasses.asdict(res)), flush=True)
    await ml.close()
    await tier.close()
    await client.close()
    await meta.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
