"""Read-only snapshots of the cluster for `quire admin`: topics, partitions with their owners,
leader epochs, offsets and ledgers (with ensembles), gateways and bookies. Reads the metadata
store only (ledger metadata included), never a bookie or a partition log."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

# Before gateway.partition.log, which imports gateway.handlers.registry: importing the handlers
# package loads every handler module, and the produce handler imports gateway.partition.log.
import gateway.handlers  # noqa: F401
from gateway import paths
from gateway.cluster.membership import GatewayNode
from gateway.partition.epochs import EpochHistory
from gateway.partition.index import P_FIRST, P_NEXT
from gateway.partition.log import L_EPOCH, L_EPOCHS, L_NEXT, L_START
from gateway.topics.registry import TopicInfo
from store import layout
from store.ledger.metadata import LedgerMetadata
from store.managed.metadata import LogMetadata
from store.managed.names import log_path
from store.meta.api import MetaStore, NoNodeError

Doc = dict[str, Any]


async def _children(meta: MetaStore, path: str) -> list[str]:
    try:
        return await meta.children(path)
    except NoNodeError:
        return []


async def _get(meta: MetaStore, path: str) -> bytes | None:
    try:
        data, _ = await meta.get(path)
        return data
    except NoNodeError:
        return None


async def cluster_id(meta: MetaStore) -> str | None:
    data = await _get(meta, paths.CLUSTER_ID)
    return data.decode() if data is not None else None


async def gateways(meta: MetaStore) -> list[GatewayNode]:
    out = []
    for name in await _children(meta, paths.GATEWAYS):
        data = await _get(meta, f"{paths.GATEWAYS}/{name}")
        if data is not None:
            out.append(GatewayNode.from_bytes(data))
    return sorted(out, key=lambda n: n.node_id)


async def topics(meta: MetaStore) -> list[TopicInfo]:
    out = []
    for name in await _children(meta, paths.TOPICS):
        data = await _get(meta, paths.topic(name))
        if data is not None:
            out.append(TopicInfo.from_bytes(name, data))
    return sorted(out, key=lambda t: t.name)


async def owners(meta: MetaStore, topic_id: uuid.UUID) -> dict[int, int]:
    """partition -> node id of the lease holder."""
    out: dict[int, int] = {}
    for name in await _children(meta, f"{paths.OWNERS}/{topic_id.hex}"):
        data = await _get(meta, f"{paths.OWNERS}/{topic_id.hex}/{name}")
        if data is not None:
            out[int(name)] = int(json.loads(data)["node_id"])
    return out


async def list_topics(meta: MetaStore) -> list[Doc]:
    async def one(t: TopicInfo) -> Doc:
        held = await owners(meta, t.topic_id)
        return {
            "name": t.name,
            "topic_id": t.topic_id.hex,
            "partitions": t.partitions,
            "owned_partitions": len(held),
            "configs": dict(t.configs),
        }

    return list(await asyncio.gather(*(one(t) for t in await topics(meta))))


async def _ledger_doc(meta: MetaStore, info: Any) -> Doc:
    doc: Doc = {
        "ledger_id": info.ledger_id,
        "entries": info.entries,
        "size": info.size,
        "first_offset": int(info.props[P_FIRST]) if P_FIRST in info.props else None,
        "next_offset": int(info.props[P_NEXT]) if P_NEXT in info.props else None,
    }
    raw = await _get(meta, layout.ledger(info.ledger_id))
    if raw is None:
        doc.update(state="missing", ensembles=[])
        return doc
    md = LedgerMetadata.from_bytes(raw)
    doc.update(
        state=md.state,
        quorum=[md.ensemble_size, md.write_quorum, md.ack_quorum],
        ensembles=[[first, list(ens)] for first, ens in md.ensembles],
    )
    if md.is_closed:
        doc.update(entries=md.last_entry_id + 1, size=md.length)
    return doc


async def describe_partition(meta: MetaStore, topic: TopicInfo, partition: int, held: dict[int, int]) -> Doc:
    raw = await _get(meta, log_path(paths.partition_log_name(topic.topic_id, partition)))
    doc: Doc = {"partition": partition, "owner": held.get(partition)}
    if raw is None:
        doc.update(leader_epoch=None, epochs=[], log_start_offset=0, next_offset=0, size=0, ledgers=[])
        return doc
    md = LogMetadata.from_bytes(raw)
    ledgers = list(await asyncio.gather(*(_ledger_doc(meta, li) for li in md.ledgers)))
    ends = [lg["next_offset"] for lg in ledgers if lg["next_offset"] is not None]
    history = EpochHistory.from_text(md.props.get(L_EPOCHS))
    doc.update(
        leader_epoch=int(md.props[L_EPOCH]) if L_EPOCH in md.props else None,
        epochs=[[e, o] for e, o in history.entries],
        log_start_offset=int(md.props.get(L_START, "0")),
        # What the metadata knows; an owner's open ledger may hold more (not yet checkpointed).
        next_offset=max([int(md.props.get(L_NEXT, "0")), *ends]),
        size=sum(lg["size"] for lg in ledgers),
        ledgers=ledgers,
    )
    return doc


async def describe_topic(meta: MetaStore, name: str) -> Doc | None:
    data = await _get(meta, paths.topic(name))
    if data is None:
        return None
    t = TopicInfo.from_bytes(name, data)
    held = await owners(meta, t.topic_id)
    nodes = {n.node_id: n for n in await gateways(meta)}
    parts = list(await asyncio.gather(*(describe_partition(meta, t, p, held) for p in range(t.partitions))))
    for part in parts:
        node = nodes.get(part["owner"]) if part["owner"] is not None else None
        part["owner_address"] = f"{node.host}:{node.port}" if node is not None else None
    return {
        "name": t.name,
        "topic_id": t.topic_id.hex,
        "partitions": parts,
        "configs": dict(t.configs),
    }


async def list_gateways(meta: MetaStore) -> list[Doc]:
    nodes = await gateways(meta)
    load: dict[int, int] = {}
    for tid_hex in await _children(meta, paths.OWNERS):
        try:
            tid = uuid.UUID(hex=tid_hex)
        except ValueError:
            continue
        for node_id in (await owners(meta, tid)).values():
            load[node_id] = load.get(node_id, 0) + 1
    controller = nodes[0].node_id if nodes else None
    return [
        {
            "node_id": n.node_id,
            "address": f"{n.host}:{n.port}",
            "rack": n.rack,
            "controller": n.node_id == controller,
            "owned_partitions": load.get(n.node_id, 0),
        }
        for n in nodes
    ]


async def list_bookies(meta: MetaStore) -> list[Doc]:
    """Every bookie with a cookie (ever registered) or a live registration."""
    live = set(await _children(meta, layout.BOOKIES_AVAILABLE))
    known = set(await _children(meta, layout.BOOKIES_COOKIES))
    out = []
    for addr in sorted(live | known):
        doc: Doc = {"address": addr, "alive": addr in live, "rack": None}
        doc.update(disk_used_bytes=None, disk_free_bytes=None, instance_id=None)
        raw = await _get(meta, layout.bookie_available(addr)) if addr in live else None
        if raw is None:
            doc["alive"] = False
            raw = await _get(meta, layout.bookie_cookie(addr))
        if raw is not None:
            info = json.loads(raw)
            for key in ("rack", "disk_used_bytes", "disk_free_bytes", "instance_id"):
                if key in info:
                    doc[key] = info[key]
        out.append(doc)
    return out
