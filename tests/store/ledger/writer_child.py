"""A ledger writer run as a child process by the fencing test.

    python -m tests.store.ledger.writer_child META_URL

Prints "LEDGER <id>", then "ACK <entry id>" for every acknowledged entry (flushed before it
goes on), keeping a window of adds in flight. Entry n's payload is b"entry-<n>". Once its adds
fail as fenced it prints "FENCED <acks after fencing> <adds attempted after fencing>" and exits 0.
"""

from __future__ import annotations

import asyncio
import sys

from store.ledger import LedgerClient, LedgerFencedError
from store.meta.factory import open_meta

WINDOW = 20


async def main(meta_url: str) -> int:
    meta = open_meta(meta_url)
    await meta.start()
    client = LedgerClient(meta)
    writer = await client.create(3, 3, 2)
    out = sys.stdout
    out.write(f"LEDGER {writer.ledger_id}\n")
    out.flush()
    inflight: set[asyncio.Future[int]] = set()
    n = 0
    fenced = False
    attempts_after = 0
    while not fenced:
        while len(inflight) < WINDOW:
            try:
                inflight.add(writer.append(b"entry-%d" % n))
            except LedgerFencedError:
                fenced = True
                attempts_after += 1
                break
            n += 1
        if not inflight:
            break
        done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
        for fut in sorted(done, key=lambda f: f.result() if f.exception() is None else -1):
            if fut.exception() is None:
                out.write(f"ACK {fut.result()}\n")
            elif isinstance(fut.exception(), LedgerFencedError):
                fenced = True
        out.flush()
    # Keep trying: every add must be refused now.
    late_acks = 0
    for i in range(5):
        try:
            fut = writer.append(b"late-%d" % i)
            attempts_after += 1
            await fut
            late_acks += 1
        except LedgerFencedError:
            attempts_after += 1
    out.write(f"FENCED {late_acks} {attempts_after}\n")
    out.flush()
    await writer.abort()
    await client.close()
    await meta.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
