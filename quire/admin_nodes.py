"""`quire admin bookies` and `gateways`: the nodes' tables, and draining a bookie."""

from __future__ import annotations

from typing import Any

from quire.admin_output import size, table
from store.ledger.client import LedgerClient
from store.meta.api import MetaStore
from store.recovery import service as recovery


def render_bookies(docs: list[dict[str, Any]]) -> str:
    rows = [
        (
            d["address"],
            "up" if d["alive"] else "down (cookie only)",
            d["rack"],
            size(d["disk_used_bytes"]),
            size(d["disk_free_bytes"]),
            d["instance_id"],
        )
        for d in docs
    ]
    return table(["BOOKIE", "STATUS", "RACK", "DISK_USED", "DISK_FREE", "INSTANCE"], rows)


async def decommission(meta: MetaStore, address: str, wait: float) -> tuple[int, Any, str]:
    lc = LedgerClient(meta)
    try:
        before = await recovery.ledgers_on(lc.env, address)
        left = await recovery.decommission(lc.env, address, wait_s=wait or None)
    finally:
        await lc.close()
    doc = {"bookie": address, "ledgers": len(before), "remaining": left}
    if left and wait:
        return 1, doc, f"bookie {address}: {len(left)} of {len(before)} ledgers still on it after {wait:.0f} s: {left}"
    if left:
        return 0, doc, f"bookie {address}: {len(left)} ledgers marked under-replicated; auto-recovery drains them"
    return 0, doc, f"bookie {address} drained: no ledger names it ({len(before)} moved); it can be stopped"


def render_gateways(docs: list[dict[str, Any]]) -> str:
    rows = [
        (d["node_id"], d["address"], d["rack"], "yes" if d["controller"] else "", d["owned_partitions"])
        for d in docs
    ]
    return table(["NODE", "ADDRESS", "RACK", "CONTROLLER", "PARTITIONS"], rows)
