"""Keep following a node's children through one-shot watches (re-armed after every event)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from store.clock import SYSTEM_CLOCK, Clock
from store.meta.api import MetaError, MetaStore, NoNodeError, SessionExpiredError, WatchEvent
from store.retry import Backoff, Retry

log = logging.getLogger(__name__)

# While the store reconnects by itself after a connection loss.
RETRY_BACKOFF = Backoff(initial=0.25, maximum=2.0)


async def follow_children(
    meta: MetaStore,
    path: str,
    handle: Callable[[list[str]], Awaitable[None]],
    *,
    stop: asyncio.Event,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Call `handle(children)` now and after every change, until `stop` is set or the session
    ends. A missing node counts as no children (its creation is watched)."""
    retry = Retry(RETRY_BACKOFF, clock=clock)
    while not stop.is_set():
        fired = asyncio.Event()

        def on_event(_: WatchEvent, fired: asyncio.Event = fired) -> None:
            fired.set()

        try:
            try:
                kids = await meta.children(path, watch=on_event)
            except NoNodeError:
                if await meta.exists(path, watch=on_event) is not None:
                    continue  # created between the two calls
                kids = []
            await handle(kids)
            retry.reset()
        except SessionExpiredError:
            return
        except MetaError as e:
            # Connection trouble: retry (the store reconnects by itself).
            log.info("following %s: %s", path, e)
            await retry.pause()
            continue
        waiter = asyncio.ensure_future(fired.wait())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            stopper.cancel()
