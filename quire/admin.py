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
import contextlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from gateway.cluster import inspect
from quire import settings as st
from store.ledger.client import LedgerClient
from store.ledger.errors import LedgerError
from store.managed.errors import ManagedLogError
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from store.offload import offloader
from store.offload.tier import Tier
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


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _render_topics(docs: list[dict[str, Any]]) -> str:
    rows = [
        (d["name"], d["topic_id"], d["partitions"], d["owned_partitions"], _configs(d["configs"]))
        for d in docs
    ]
    return table(["TOPIC", "ID", "PARTITIONS", "OWNED", "CONFIGS"], rows)


def _configs(configs: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(configs.items())) or "-"


def _render_topic(doc: dict[str, Any]) -> str:
    out = [
        f"Topic: {doc['name']}  id: {doc['topic_id']}  partitions: {len(doc['partitions'])}  "
        f"configs: {_configs(doc['configs'])}",
        "",
    ]
    rows = []
    for p in doc["partitions"]:
        owner = f"{p['owner']} ({p['owner_address']})" if p["owner_address"] else p["owner"]
        epochs = " ".join(f"{e}@{o}" for e, o in p["epochs"]) or None
        rows.append(
            (
                p["partition"],
                owner,
                p["leader_epoch"],
                p["log_start_offset"],
                p["next_offset"],
                _size(p["size"]),
                len(p["ledgers"]),
                epochs,
            )
        )
    out.append(
        table(["PARTITION", "OWNER", "EPOCH", "START", "END", "SIZE", "LEDGERS", "EPOCH_HISTORY"], rows)
    )
    lrows = []
    for p in doc["partitions"]:
        for lg in p["ledgers"]:
            quorum = "/".join(map(str, lg.get("quorum", []))) or None
            ens = "; ".join(f"{first}:{','.join(bk)}" for first, bk in lg["ensembles"]) or None
            offsets = None if lg["first_offset"] is None else f"{lg['first_offset']}..{lg['next_offset']}"
            lrows.append(
                (
                    p["partition"],
                    lg["ledger_id"],
                    lg["state"],
                    lg["entries"],
                    _size(lg["size"]),
                    offsets,
                    quorum,
                    ens,
                )
            )
    if lrows:
        out += [
            "",
            table(
                [
                    "PARTITION",
                    "LEDGER",
                    "STATE",
                    "ENTRIES",
                    "SIZE",
                    "OFFSETS",
                    "E/WQ/AQ",
                    "ENSEMBLES (first entry: bookies)",
                ],
                lrows,
            ),
        ]
    return "\n".join(out)


def _render_bookies(docs: list[dict[str, Any]]) -> str:
    rows = [
        (
            d["address"],
            "up" if d["alive"] else "down (cookie only)",
            d["rack"],
            _size(d["disk_used_bytes"]),
            _size(d["disk_free_bytes"]),
            d["instance_id"],
        )
        for d in docs
    ]
    return table(["BOOKIE", "STATUS", "RACK", "DISK_USED", "DISK_FREE", "INSTANCE"], rows)


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def _render_under_replicated(docs: list[dict[str, Any]]) -> str:
    rows = [
        (
            d["ledger_id"],
            ", ".join(f"{a} ({b['reason']})" for a, b in sorted(d["bookies"].items())),
            _when(d["since_ms"]),
            "yes" if d["in_progress"] else "no",
        )
        for d in docs
    ]
    return table(["LEDGER", "BOOKIES", "SINCE", "IN_PROGRESS"], rows)


def _render_recovery(doc: dict[str, Any]) -> str:
    last = doc["last_replication_s"]
    rows = [
        ("auditor", doc["auditor"] or "none elected"),
        ("under-replicated ledgers", doc["under_replicated"]),
        ("in progress", doc["in_progress"]),
        ("re-replicated", f"{_size(doc['bytes_rereplicated'])} ({doc['entries_rereplicated']} entries, "
                          f"{doc['ledgers_rereplicated']} ledgers)"),
        ("last ledger fully replicated after", "-" if last is None else f"{last:.1f} s"),
        ("last sampled check", _when(doc["last_check_ms"] or 0)),
        ("decommissioning", ", ".join(doc["decommissioning"]) or "-"),
    ]
    return table(["RECOVERY", "STATUS"], rows)


async def _decommission(meta: MetaStore, address: str, wait: float) -> tuple[int, Any, str]:
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


def _render_gateways(docs: list[dict[str, Any]]) -> str:
    rows = [
        (d["node_id"], d["address"], d["rack"], "yes" if d["controller"] else "", d["owned_partitions"])
        for d in docs
    ]
    return table(["NODE", "ADDRESS", "RACK", "CONTROLLER", "PARTITIONS"], rows)


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


def _render_group(doc: dict[str, Any]) -> str:
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


@contextlib.contextmanager
def _progress(desc: str, unit: str = " entries") -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr while logs are read, only on a terminal (output stays clean for
    pipes and --json consumers)."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    with tqdm(desc=desc, unit=unit, file=sys.stderr, leave=False) as bar:
        yield bar.update


async def _run_groups(args: argparse.Namespace, meta: MetaStore) -> tuple[int, Any, str]:
    with _progress("reading __consumer_offsets") as progress:
        return await _read_groups(args, meta, progress)


async def _read_groups(
    args: argparse.Namespace, meta: MetaStore, progress: Callable[[int], None] | None
) -> tuple[int, Any, str]:
    tier, _ = _offload_tier(args)  # ledgers whose bookie copy is gone are read from there
    peek = inspect.LogPeek(meta, on_entries=progress, offloaded=tier)
    try:
        if args.action == "list":
            docs = await inspect.list_groups(meta, peek)
            return 0, docs, _render_groups(docs)
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


def _render_offload(docs: list[dict[str, Any]]) -> str:
    rows = [[d["topic"], d["partition"], "on" if d["remote_storage"] else "off", _size(d["bookie_bytes"]),
             _size(d["offloaded_bytes"]), _size(d["pending_bytes"]), f'{d["offloaded_ledgers"]}/{d["ledgers"]}']
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
            await asyncio.wait_for(changed.wait(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            return False
    return True


def _offload_tier(args: argparse.Namespace) -> tuple[Tier | None, int]:
    """The offload tier of quire.offload.* (from --config, QUIRE_OFFLOAD_*, the data dir), and
    the cleanup margin."""
    r = st.resolve(st.GATEWAY, None, file=getattr(args, "config", None))
    return st.offload_tier(r, args.data_dir or r.get_value("quire.data.dir")), r.get_value("quire.offload.cleanup.margin.ms")


async def _run_offload(args: argparse.Namespace, meta: MetaStore) -> tuple[int, Any, str]:
    if args.action in (None, "status"):
        docs = await inspect.offload_status(meta, getattr(args, "topic", None))
        if docs is None:
            return 1, {"error": f"unknown topic {args.topic!r}"}, f"error: unknown topic {args.topic!r}"
        return 0, docs, _render_offload(docs)
    if args.action == "trigger":
        reqs = await inspect.request_offload(meta, args.topic)
        if reqs is None:
            return 1, {"error": f"unknown topic {args.topic!r}"}, f"error: unknown topic {args.topic!r}"
        with _progress(f"offloading {args.topic}", " partitions") as progress:
            done = await wait_gone(meta, reqs, args.timeout, progress)
        docs = await inspect.offload_status(meta, args.topic) or []
        if not done:
            return 1, {"error": "timed out waiting for partition owners", "status": docs}, (
                "error: timed out waiting for partition owners (is a gateway with an offload tier running?)")
        return 0, docs, _render_offload(docs)
    tier, margin = _offload_tier(args)
    if tier is None:
        return 1, {"error": "no offload tier configured"}, "error: no offload tier configured (quire.offload.*)"
    try:
        gone = await offloader.cleanup(meta, tier, args.margin_ms if args.margin_ms is not None else margin)
    finally:
        await tier.close()
    return 0, {"deleted": gone}, "\n".join([f"deleted {k}" for k in gone] + [f"{len(gone)} orphaned objects deleted"])


async def _run(args: argparse.Namespace, meta: MetaStore) -> tuple[int, Any, str]:
    """(exit code, JSON document, rendered table)."""
    if args.what == "offload":
        return await _run_offload(args, meta)
    if args.what == "groups":
        return await _run_groups(args, meta)
    if args.what == "topics" and args.action == "list":
        docs: Any = await inspect.list_topics(meta)
        return 0, docs, _render_topics(docs)
    if args.what == "topics" and args.action == "describe":
        peek = inspect.LogPeek(meta)
        try:
            doc = await inspect.describe_topic(meta, args.name, peek.client)
        finally:
            await peek.close()
        if doc is None:
            return 1, {"error": f"unknown topic {args.name!r}"}, f"error: unknown topic {args.name!r}"
        return 0, doc, _render_topic(doc)
    if args.what == "bookies" and args.action == "decommission":
        return await _decommission(meta, args.id, args.wait)
    if args.what in _VIEWS:
        read, render = _VIEWS[args.what]
        docs = await read(meta)
        return 0, docs, render(docs)
    raise AssertionError(args)


# The views that are one read of the metadata store and its table: what -> (read, render).
_VIEWS: dict[str, tuple[Callable[[MetaStore], Awaitable[Any]], Callable[[Any], str]]] = {
    "bookies": (inspect.list_bookies, _render_bookies),
    "ledgers": (recovery.under_replicated, _render_under_replicated),
    "recovery": (recovery.status, _render_recovery),
    "gateways": (inspect.list_gateways, _render_gateways),
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
