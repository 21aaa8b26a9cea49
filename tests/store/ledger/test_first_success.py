"""store.ledger.fetch.first_success: a losing replica's read that ends with an error while it is
cancelled (its connection lost as the reader goes away) is not logged as never retrieved."""

from __future__ import annotations

import asyncio

import pytest

from store.bookie.errors import BookieUnavailableError
from store.ledger.errors import LedgerReadError
from store.ledger.fetch import first_success
from tests.support.loop_reports import LoopReports


async def test_a_loser_failing_as_it_is_cancelled_is_not_logged() -> None:
    reports = LoopReports()
    slow_started = asyncio.Event()
    slow_ended = asyncio.Event()

    async def slow() -> str:
        slow_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise BookieUnavailableError("connection to bookie lost") from None
        finally:
            slow_ended.set()
        return "slow"

    async def fast() -> str:
        await slow_started.wait()
        return "fast"

    got = await first_success([slow, fast], speculative=0.0, attempt_timeout=60.0, what="entries")
    assert got == "fast"
    await slow_ended.wait()
    assert await reports.settled() == []


async def test_every_replica_failing_still_raises() -> None:
    async def broken() -> str:
        raise BookieUnavailableError("down")

    with pytest.raises(LedgerReadError, match=r"entries 0\.\.9: every replica failed"):
        await first_success([broken, broken], speculative=0.0, attempt_timeout=1.0, what="entries 0..9")
