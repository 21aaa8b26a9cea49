"""LAC long polls: READ_LAC requests that wait until a ledger's known LAC passes the reader's.

A poll may come before the ledger's first entry reaches this bookie (a reader may ask before
the writer's first add lands here): it waits all the same, and is answered once the ledger
appears and its LAC passes. A poll on a ledger that gets deleted fails.
"""

from __future__ import annotations

import asyncio

from store.tasks import within

Waiter = tuple[int, asyncio.Future[int]]  # (the reader's previous LAC, its answer)


class LacPolls:
    def __init__(self) -> None:
        self.waiting: dict[int, list[Waiter]] = {}  # ledger id -> polls, known ledger or not

    def notify(self, ledger_id: int, lac: int) -> None:
        """The ledger's known LAC is now `lac`: answer the polls it passes."""
        waiters = self.waiting.get(ledger_id)
        if not waiters:
            return
        keep = []
        for prev, fut in waiters:
            if fut.done():
                continue
            if lac > prev:
                fut.set_result(lac)
            else:
                keep.append((prev, fut))
        if keep:
            self.waiting[ledger_id] = keep
        else:
            del self.waiting[ledger_id]

    async def wait(self, ledger_id: int, previous_lac: int, wait_s: float) -> int | None:
        """The LAC a notify() passes previous_lac with, or None after `wait_s` seconds."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        entry = (previous_lac, fut)
        self.waiting.setdefault(ledger_id, []).append(entry)
        try:
            return await within(fut, wait_s)
        except TimeoutError:
            return None
        finally:
            self._forget(ledger_id, entry)

    def fail(self, ledger_id: int, exc: BaseException) -> None:
        for _, fut in self.waiting.pop(ledger_id, []):
            if not fut.done():
                fut.set_exception(exc)

    def _forget(self, ledger_id: int, entry: Waiter) -> None:
        waiters = self.waiting.get(ledger_id)
        if waiters is not None and entry in waiters:
            waiters.remove(entry)
            if not waiters:
                del self.waiting[ledger_id]
