"""`quire admin groups`: consumer and share groups read from `__consumer_offsets`, partition log
tails and the share-partition states the partitions' owners publish."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from gateway.cluster import inspect
from quire.admin_offload import offload_tier
from quire.admin_output import progress_bar, table
from store.ledger.errors import LedgerError
from store.managed.errors import ManagedLogError
from store.meta.api import MetaStore


def _coordinator(d: dict[str, Any]) -> str | None:
    if d["coordinator"] is None:
        return None
    addr = f" ({d['coordinator_address']})" if d["coordinator_address"] else ""
    return f"{d['coordinator']}{addr}"


def _protocol(d: dict[str, Any]) -> str | None:
    parts = [x for x in (d["protocol_type"], d["protocol"]) if x]
    return "/".join(parts) or None


def _render_groups(docs: list[dict[str, Any]]) -> str:
    rows = [
        (
            d["group"],
            d["state"],
            d["member_count"],
            _protocol(d),
            d["generation"],
            _coordinator(d),
            d["shard"],
        )
        for d in docs
    ]
    return table(["GROUP", "STATE", "MEMBERS", "PROTOCOL", "GENERATION", "COORDINATOR", "SHARD"], rows)


def _assignment(a: list[dict[str, Any]] | None) -> str | None:
    if a is None:
        return None
    return " ".join(f"{t['topic']}:{','.join(map(str, t['partitions']))}" for t in a) or "(none)"


def _render_share_group(doc: dict[str, Any]) -> str:
    out = [
        f"Share group: {doc['group']}  state: {doc['state']}  group epoch: {doc['generation']}  "
        f"coordinator: {_coordinator(doc) or '-'}  shard: {'-' if doc['shard'] is None else doc['shard']}  "
        f"backlog: {doc['total_lag']}",
    ]
    if doc["members"]:
        mrows = [(m["member_id"], m["client_id"], m["client_host"], ",".join(m["subscribed"])) for m in doc["members"]]
        out += ["", table(["MEMBER", "CLIENT_ID", "HOST", "SUBSCRIBED"], mrows)]
    prows = [
        (p["topic"], p["partition"], p["start_offset"], p["in_flight"], p["finished"], p["backlog"], p["log_end_offset"])
        for p in doc["partitions"]
    ]
    out += ["", table(["TOPIC", "PARTITION", "SPSO", "IN_FLIGHT", "ARCHIVED", "BACKLOG", "LOG_END"], prows)]
    return "\n".join(out)


def _render_group(doc: dict[str, Any]) -> str:
    if doc.get("type") == "share":
        return _render_share_group(doc)
    out = [
        f"Group: {doc['group']}  state: {doc['state'] or '-'}  protocol: {_protocol(doc) or '-'}  "
        f"generation: {'-' if doc['generation'] is None else doc['generation']}  "
        f"coordinator: {_coordinator(doc) or '-'}  shard: {'-' if doc['shard'] is None else doc['shard']}  "
        f"total lag: {doc['total_lag']}",
    ]
    if doc["members"]:
        mrows = [
            (
                m["member_id"],
                m["group_instance_id"],
                m["client_id"],
                m["client_host"],
                _assignment(m["assignment"]),
            )
            for m in doc["members"]
        ]
        out += ["", table(["MEMBER", "INSTANCE", "CLIENT_ID", "HOST", "ASSIGNMENT"], mrows)]
    prows = [
        (
            p["topic"],
            p["partition"],
            p["committed_offset"],
            p["log_end_offset"],
            p["lag"],
            p["published_offset"],
            "yes" if p["durable_cursor"] else "no",
            p["member_id"],
            p["client_id"],
            p["client_host"],
        )
        for p in doc["partitions"]
    ]
    headers = [
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "LOG_END",
        "LAG",
        "PUBLISHED",
        "CURSOR",
        "MEMBER",
        "CLIENT_ID",
    ]
    out += ["", table([*headers, "HOST"], prows)]
    return "\n".join(out)


async def run_groups(args: argparse.Namespace, meta: MetaStore) -> tuple[int, Any, str]:
    with progress_bar("reading __consumer_offsets") as progress:
        return await _read_groups(args, meta, progress)


async def _read_groups(
    args: argparse.Namespace, meta: MetaStore, progress: Callable[[int], None] | None
) -> tuple[int, Any, str]:
    tier, _ = offload_tier(args)  # ledgers whose bookie copy is gone are read from there
    peek = inspect.LogPeek(meta, on_entries=progress, offloaded=tier)
    try:
        if args.action == "list":
            docs = await inspect.list_groups(meta, peek)
            return 0, docs, _render_groups(docs)
        doc = await inspect.describe_share_group(meta, peek, args.group)
        if doc is None:
            doc = await inspect.describe_group(meta, peek, args.group)
        if doc is None:
            return 1, {"error": f"unknown group {args.group!r}"}, f"error: unknown group {args.group!r}"
        return 0, doc, _render_group(doc)
    except (LedgerError, ManagedLogError) as e:
        return 1, {"error": f"cannot read a log: {e}"}, f"error: cannot read a log: {e}"
    finally:
        await peek.close()
        if tier is not None:
            await tier.close()
