"""`quire admin`: read-only views of a cluster (or a standalone's data dir) for operators.

    quire admin --meta zk://host:2181/quire topics list
    quire admin --data-dir ./quire-data topics describe orders
    quire admin --meta URL --json bookies list
    quire admin --meta URL gateways list
    quire admin --data-dir ./quire-data groups list
    quire admin --data-dir ./quire-data groups describe my-group
    quire admin --meta URL ledgers under-replicated
    quire admin --meta URL recovery status
    quire admin --meta URL bookies decommission HOST:PORT   (drains it through auto-recovery)
    quire admin topics list --meta URL      (options may also follow the subcommand)
    quire admin --data-dir ./quire-data offload status [TOPIC]
    quire admin --data-dir ./quire-data offload trigger TOPIC
    quire admin --data-dir ./quire-data offload cleanup [--config server.properties]

Read-only except `bookies decommission` (marks a bookie's ledgers for auto-recovery), `offload trigger` (asks partition owners to offload now, through request nodes
they watch) and `offload cleanup` (removes offloaded objects no metadata names; the tier comes
from quire.offload.* in --config / QUIRE_OFFLOAD_* / the data dir). Reads the metadata store, and for groups also the `__consumer_offsets` logs and the tails
of partition logs, read from the bookies without fencing. Tables by default, --json for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.cluster import inspect
from quire.admin_groups import run_groups
from quire.admin_nodes import decommission, render_bookies, render_gateways
from quire.admin_offload import run_offload
from quire.admin_recovery import render_recovery, render_under_replicated
from quire.admin_topics import render_topic, render_topics
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from store.recovery import service as recovery


def _common() -> argparse.ArgumentParser:
    # Accepted before or after the subcommand (`quire admin topics list --meta URL`).
    c = argparse.ArgumentParser(add_help=False)
    c.add_argument(
        "--meta", default=argparse.SUPPRESS, help="metadata store: zk://host:port/chroot or embedded:///dir"
    )
    c.add_argument(
        "--data-dir", default=argparse.SUPPRESS, help="a standalone's data directory (its embedded store)"
    )
    c.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    return c


def _parser() -> argparse.ArgumentParser:
    common = _common()
    p = argparse.ArgumentParser(
        prog="quire admin",
        description="inspect topics, consumer groups, gateways and bookies (a bare noun lists)",
        parents=[common],
    )
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("topics", help="topics and their partitions").add_subparsers(dest="action")
    t.add_parser("list", help="every topic", parents=[common])
    d = t.add_parser(
        "describe", help="partitions: owner, leader epoch, offsets, ledgers and bookies", parents=[common]
    )
    d.add_argument("name")
    b = sub.add_parser("bookies", help="storage nodes").add_subparsers(dest="action")
    b.add_parser("list", help="address, rack, disk use, liveness", parents=[common])
    dc = b.add_parser("decommission", help="drain a bookie through auto-recovery: mark all its ledgers "
                      "under-replicated, then wait until none names it", parents=[common])
    dc.add_argument("id", help="the bookie's address HOST:PORT")
    dc.add_argument("--wait", type=float, default=600.0, help="seconds to wait for the drain (0: do not wait)")
    lg = sub.add_parser("ledgers", help="ledgers").add_subparsers(dest="action")
    lg.add_parser("under-replicated", help="ledgers that lost a replica: which bookies, since when, why",
                  parents=[common])
    rc = sub.add_parser("recovery", help="auto-recovery").add_subparsers(dest="action")
    rc.add_parser("status", help="auditor, under-replicated ledgers, re-replication in progress and done",
                  parents=[common])
    g = sub.add_parser("gateways", help="live gateways").add_subparsers(dest="action")
    g.add_parser("list", help="node ids, addresses, partitions owned", parents=[common])
    cg = sub.add_parser("groups", help="consumer groups").add_subparsers(dest="action")
    cg.add_parser("list", help="state, members, protocol, coordinator", parents=[common])
    gd = cg.add_parser(
        "describe",
        help="members and assignments; per partition committed offset, log-end offset, lag",
        parents=[common],
    )
    gd.add_argument("group")
    o = sub.add_parser("offload", help="tiered storage of partition logs").add_subparsers(dest="action")
    os_ = o.add_parser("status", help="per partition: bytes on bookies, offloaded, pending", parents=[common])
    os_.add_argument("topic", nargs="?")
    ot = o.add_parser("trigger", help="offload every closed ledger of a topic now, with progress",
                      parents=[common])
    ot.add_argument("topic")
    ot.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the owners")
    oc = o.add_parser("cleanup", help="delete offloaded objects no metadata names", parents=[common])
    oc.add_argument("--config", help="server.properties with the quire.offload.* settings")
    oc.add_argument("--margin-ms", type=int, default=None,
                    help="only objects older than this (default quire.offload.cleanup.margin.ms)")
    return p


def _parse(argv: list[str]) -> argparse.Namespace:
    p = _parser()
    args = p.parse_args(argv)
    args.meta = getattr(args, "meta", None)
    args.data_dir = getattr(args, "data_dir", None)
    args.json = getattr(args, "json", False)
    args.action = args.action or {"ledgers": "under-replicated", "recovery": "status"}.get(args.what, "list")
    if (args.meta is None) == (args.data_dir is None):
        p.error("give exactly one of --meta URL or --data-dir DIR")
    return args


def meta_url(args: argparse.Namespace) -> str:
    if args.meta:
        return str(args.meta)
    return f"embedded://{os.path.abspath(os.path.join(args.data_dir, 'meta'))}"


async def _run(args: argparse.Namespace, meta: MetaStore) -> tuple[int, Any, str]:
    """(exit code, JSON document, rendered table)."""
    if args.what == "offload":
        return await run_offload(args, meta)
    if args.what == "groups":
        return await run_groups(args, meta)
    if args.what == "topics" and args.action == "list":
        docs: Any = await inspect.list_topics(meta)
        return 0, docs, render_topics(docs)
    if args.what == "topics" and args.action == "describe":
        peek = inspect.LogPeek(meta)
        try:
            doc = await inspect.describe_topic(meta, args.name, peek.client)
        finally:
            await peek.close()
        if doc is None:
            return 1, {"error": f"unknown topic {args.name!r}"}, f"error: unknown topic {args.name!r}"
        return 0, doc, render_topic(doc)
    if args.what == "bookies" and args.action == "decommission":
        return await decommission(meta, args.id, args.wait)
    if args.what in _VIEWS:
        read, render = _VIEWS[args.what]
        docs = await read(meta)
        return 0, docs, render(docs)
    raise AssertionError(args)


# The views that are one read of the metadata store and its table: what -> (read, render).
_VIEWS: dict[str, tuple[Callable[[MetaStore], Awaitable[Any]], Callable[[Any], str]]] = {
    "bookies": (inspect.list_bookies, render_bookies),
    "ledgers": (recovery.under_replicated, render_under_replicated),
    "recovery": (recovery.status, render_recovery),
    "gateways": (inspect.list_gateways, render_gateways),
}


async def _main(args: argparse.Namespace, url: str) -> int:
    meta = open_meta(url)
    await meta.start()
    try:
        code, doc, text = await _run(args, meta)
    finally:
        await meta.close()
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(text, file=sys.stdout if code == 0 else sys.stderr)
    return code


def main(argv: list[str]) -> int:
    """Entry point of `quire admin ...` (argv: the arguments after `admin`)."""
    args = _parse(argv)
    url = meta_url(args)
    if url.startswith("embedded://") and not os.path.isdir(url[len("embedded://") :]):
        # Opening would create an empty store: say what is wrong instead.
        print(f"error: no metadata store at {url[len('embedded://') :]}", file=sys.stderr)
        return 2
    return asyncio.run(_main(args, url))
