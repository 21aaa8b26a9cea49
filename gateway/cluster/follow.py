"""Keep following a node's children through one-shot watches (re-armed after every event)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from store.meta.api import MetaError, MetaStore, NoNodeError, SessionExpiredError, WatchEvent

log = logging.getLogger(__name__)

RETRY_DELAY = 0.5


async def follow_children(
    meta: MetaStore, path: str, handle: Callable[[list[str]], Awaitable[None]], *, stop: asyncio.Event
) -> None:
    """Call `handle(children)` now and after every change, until `stop` is set or the session
    ends. A missing node counts as no children (its creation is watched)."""
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
        except SessionExpiredError:
            return
        except MetaError as e:
            # Connection trouble: retry (the store reconnects by itself).
            log.info("following %s: %s", path, e)
            await asyncio.sleep(RETRY_DELAY)
            continue
        waiter = asyncio.ensure_future(fired.wait())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            stopper.cancel()
