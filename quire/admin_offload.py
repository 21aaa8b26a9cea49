"""`quire admin offload`: status, triggering offload on the partition owners, and cleanup."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

from gateway.cluster import inspect
from quire import settings as st
from quire.admin_output import progress_bar, size, table
from store.meta.api import MetaStore
from store.offload import offloader
from store.offload.tier import Tier
from store.tasks import within


def _render_offload(docs: list[dict[str, Any]]) -> str:
    rows = [[d["topic"], d["partition"], "on" if d["remote_storage"] else "off", size(d["bookie_bytes"]),
             size(d["offloaded_bytes"]), size(d["pending_bytes"]), f'{d["offloaded_ledgers"]}/{d["ledgers"]}']
            for d in docs]
    return table(["TOPIC", "PARTITION", "REMOTE", "ON BOOKIES", "OFFLOADED", "PENDING", "LEDGERS OFFLOADED"], rows)


async def wait_gone(
    meta: MetaStore, paths: list[str], limit_s: float, progress: Callable[[int], None] | None
) -> bool:
    """Until every request node is deleted by its owner (watched, no polling); False after limit_s."""
    loop = asyncio.get_running_loop()
    left = list(paths)
    deadline = loop.time() + limit_s
    while left:
        changed = asyncio.Event()

        def fired(_e: Any, ev: asyncio.Event = changed) -> None:
            loop.call_soon_threadsafe(ev.set)

        still = []
        for p in left:
            if await meta.exists(p, watch=fired) is not None:
                still.append(p)
        if progress is not None and len(still) < len(left):
            progress(len(left) - len(still))
        left = still
        if not left:
            return True
        try:
            await within(changed.wait(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            return False
    return True


def offload_tier(args: argparse.Namespace) -> tuple[Tier | None, int]:
    """The offload tier of quire.offload.* (from --config, QUIRE_OFFLOAD_*, the data dir), and
    the cleanup margin."""
    r = st.resolve(st.GATEWAY, None, file=getattr(args, "config", None))
    return st.offload_tier(r, args.data_dir or r.get_value("quire.data.dir")), r.get_value("quire.offload.cleanup.margin.ms")


async def run_offload(args: argparse.Namespace, meta: MetaStore) -> tuple[int, Any, str]:
    if args.action in (None, "status"):
        docs = await inspect.offload_status(meta, getattr(args, "topic", None))
        if docs is None:
            return 1, {"error": f"unknown topic {args.topic!r}"}, f"error: unknown topic {args.topic!r}"
        return 0, docs, _render_offload(docs)
    if args.action == "trigger":
        reqs = await inspect.request_offload(meta, args.topic)
        if reqs is None:
            return 1, {"error": f"unknown topic {args.topic!r}"}, f"error: unknown topic {args.topic!r}"
        with progress_bar(f"offloading {args.topic}", " partitions") as progress:
            done = await wait_gone(meta, reqs, args.timeout, progress)
        docs = await inspect.offload_status(meta, args.topic) or []
        if not done:
            return 1, {"error": "timed out waiting for partition owners", "status": docs}, (
                "error: timed out waiting for partition owners (is a gateway with an offload tier running?)")
        return 0, docs, _render_offload(docs)
    tier, margin = offload_tier(args)
    if tier is None:
        return 1, {"error": "no offload tier configured"}, "error: no offload tier configured (quire.offload.*)"
    try:
        gone = await offloader.cleanup(meta, tier, args.margin_ms if args.margin_ms is not None else margin)
    finally:
        await tier.close()
    return 0, {"deleted": gone}, "\n".join([f"deleted {k}" for k in gone] + [f"{len(gone)} orphaned objects deleted"])
