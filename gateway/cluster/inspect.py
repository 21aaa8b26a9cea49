"""Read-only snapshots of the cluster for `quire admin`: topics, partitions with their owners,
leader epochs, offsets and ledgers (with ensembles), gateways and bookies from the metadata
store alone; consumer groups (members, committed offsets, lag) also read logs from the bookies,
never fencing or writing anything."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from coordinator.group.config import OFFSETS_TOPIC
from coordinator.group.consumer_group import preferred_assignor
from coordinator.group.cursors import CURSOR_PREFIX, GROUP_OFFSETS, read_group_offsets
from coordinator.group.hashing import shard_for
from coordinator.group.stored import GroupLogReplay, StoredGroup, StoredShareGroup, TopicPartition
from gateway import paths
from gateway.cluster.membership import GatewayNode
from gateway.partition.epochs import EpochHistory
from gateway.share_offsets import published_partitions, read_partition_states
from gateway.topics.registry import TopicInfo
from gateway.topics.registry import read_topics as topics
from kafka_log.index import P_FIRST, P_NEXT
from kafka_log.keys import L_EPOCH, L_EPOCHS, L_START
from kafka_log.view import batch_offsets, scan, stored_end_offset
from kafka_log.view import log_end_offset as end_offset_of
from kafka_wire.api import decode_versioned, schema_class
from store import layout
from store.ledger.client import LedgerClient
from store.ledger.errors import LedgerError
from store.ledger.metadata import LedgerMetadata
from store.managed.config import LogConfig
from store.managed.errors import NoSuchLogError
from store.managed.metadata import LogMetadata
from store.managed.names import cursors_path, encode_name, log_path
from store.managed.position import Position
from store.managed.reader import OffloadedSource
from store.managed.readonly import ManagedLogReader
from store.meta.api import MetaStore, NoNodeError
from store.offload import offloader, policy

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


LIVE_READ_ENTRIES = 1000  # entries per read while sizing an open ledger


async def _live(client: LedgerClient, ledger_id: int, doc: Doc) -> None:
    """An open ledger as readers see it now: entries up to the LAC (read through the ledger
    client, no fencing), their size, and the offset after its last batch."""
    reader = await client.open(ledger_id)
    try:
        lac = reader.last_add_confirmed
        size = 0
        head: bytes | memoryview = b""  # entries read from bookies are views of the responses
        last: bytes | memoryview = b""
        for first in range(0, lac + 1, LIVE_READ_ENTRIES):
            got = await reader.read(first, min(lac, first + LIVE_READ_ENTRIES - 1))
            size += sum(map(len, got))
            head, last = head or (got[0] if got else b""), got[-1] if got else last
    finally:
        await reader.close()
    doc.update(entries=lac + 1, size=size)
    if last and doc["next_offset"] is None:  # not indexed yet: its batches say
        doc.update(first_offset=batch_offsets(head)[0], next_offset=batch_offsets(last)[1] + 1)


async def _ledger_doc(meta: MetaStore, info: Any, client: LedgerClient | None = None) -> Doc:
    doc: Doc = {
        "ledger_id": info.ledger_id,
        "entries": info.entries,
        "size": info.size,
        "first_offset": int(info.props[P_FIRST]) if P_FIRST in info.props else None,
        "next_offset": int(info.props[P_NEXT]) if P_NEXT in info.props else None,
    }
    if info.offload is not None:
        doc["offload"] = {"driver": info.offload.driver, "data": info.offload.data, "size": info.offload.size,
                          "bookie_deleted": info.offload.bookie_deleted}
    raw = await _get(meta, layout.ledger(info.ledger_id))
    if raw is None:
        doc.update(state="offloaded" if info.offload is not None else "missing", ensembles=[])
        return doc
    md = LedgerMetadata.from_bytes(raw)
    doc.update(
        state=md.state,
        quorum=[md.ensemble_size, md.write_quorum, md.ack_quorum],
        ensembles=[[first, list(ens)] for first, ens in md.ensembles],
    )
    if md.is_closed:
        doc.update(entries=md.last_entry_id + 1, size=md.length)
    elif client is not None:
        try:
            await _live(client, info.ledger_id, doc)
        except LedgerError:
            pass  # its bookies cannot say: the metadata's numbers stand
    return doc


async def describe_partition(
    meta: MetaStore, topic: TopicInfo, partition: int, held: dict[int, int], client: LedgerClient | None = None
) -> Doc:
    raw = await _get(meta, log_path(paths.partition_log_name(topic.topic_id, partition)))
    doc: Doc = {"partition": partition, "owner": held.get(partition)}
    if raw is None:
        doc.update(leader_epoch=None, epochs=[], log_start_offset=0, next_offset=0, size=0, ledgers=[])
        return doc
    md = LogMetadata.from_bytes(raw)
    ledgers = list(await asyncio.gather(*(_ledger_doc(meta, li, client) for li in md.ledgers)))
    ends = [lg["next_offset"] for lg in ledgers if lg["next_offset"] is not None]  # live ones too
    history = EpochHistory.from_text(md.props.get(L_EPOCHS))
    doc.update(
        leader_epoch=int(md.props[L_EPOCH]) if L_EPOCH in md.props else None,
        epochs=[[e, o] for e, o in history.entries],
        log_start_offset=int(md.props.get(L_START, "0")),
        # What the metadata knows; an owner's open ledger may hold more (not yet checkpointed).
        next_offset=max([stored_end_offset(md), *ends]),
        size=sum(lg["size"] for lg in ledgers),
        ledgers=ledgers,
    )
    return doc


async def describe_topic(meta: MetaStore, name: str, client: LedgerClient | None = None) -> Doc | None:
    """client: to report open ledgers live (up to their LAC); without, as the metadata has them."""
    data = await _get(meta, paths.topic(name))
    if data is None:
        return None
    t = TopicInfo.from_bytes(name, data)
    held = await owners(meta, t.topic_id)
    nodes = {n.node_id: n for n in await gateways(meta)}
    parts = list(await asyncio.gather(*(describe_partition(meta, t, p, held, client) for p in range(t.partitions))))
    for part in parts:
        node = nodes.get(part["owner"]) if part["owner"] is not None else None
        part["owner_address"] = f"{node.host}:{node.port}" if node is not None else None
    return {
        "name": t.name,
        "topic_id": t.topic_id.hex,
        "partitions": parts,
        "configs": dict(t.configs),
    }


async def offload_status(meta: MetaStore, name: str | None = None) -> list[Doc] | None:
    """Per topic partition: bytes on bookies, bytes offloaded, bytes pending (closed ledgers
    the offload policy selects that are not offloaded yet). None if `name` is unknown."""
    wanted = [t for t in await topics(meta) if name is None or t.name == name]
    if name is not None and not wanted:
        return None
    out: list[Doc] = []
    now = int(time.time() * 1000)
    for t in wanted:
        for p in range(t.partitions):
            raw = await _get(meta, log_path(paths.partition_log_name(t.topic_id, p)))
            md = LogMetadata.from_bytes(raw) if raw is not None else LogMetadata()
            cfg = md.config or LogConfig()
            pending = set(policy.to_offload(md.ledgers, cfg, now))
            out.append({
                "topic": t.name, "partition": p, "remote_storage": cfg.offload,
                "bookie_bytes": policy.on_bookies(md.ledgers), "offloaded_bytes": policy.offloaded(md.ledgers),
                "pending_bytes": sum(li.size for li in md.ledgers if li.ledger_id in pending),
                "ledgers": len(md.ledgers), "offloaded_ledgers": sum(1 for li in md.ledgers if li.offload),
            })
    return out


async def request_offload(meta: MetaStore, name: str) -> list[str] | None:
    """Ask the owners of every partition of a topic to offload all closed ledgers now; the
    request nodes' paths (each deleted by its owner once done), None if the topic is unknown."""
    wanted = [t for t in await topics(meta) if t.name == name]
    if not wanted:
        return None
    t = wanted[0]
    return [await offloader.request(meta, paths.partition_log_name(t.topic_id, p)) for p in range(t.partitions)]


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


# ---- consumer groups ---------------------------------------------------------------------

class LogPeek:
    """Non-fencing reads of whole segmented logs for snapshots, through one ledger client.
    Like BookKeeper's readUnconfirmed, they also read an open tail past the bookies' LAC (see
    ManagedLogReader.read_unconfirmed)."""

    def __init__(
        self, meta: MetaStore, on_entries: Callable[[int], None] | None = None,
        offloaded: OffloadedSource | None = None,
    ) -> None:
        self.meta = meta
        self.on_entries = on_entries  # progress: called with each count of log entries read
        self.offloaded = offloaded  # the offload tier, for ledgers whose bookie copy is gone
        self.client = LedgerClient(meta)

    async def close(self) -> None:
        await self.client.close()

    async def batches(self, name: str) -> AsyncIterator[bytes]:
        """Every stored batch of a segmented log in order, as runs of whole batches (none if
        there is no such log)."""
        try:
            reader = await ManagedLogReader.open(self.meta, self.client, name, self.offloaded)
        except NoSuchLogError:
            return
        try:
            last: Position | None = None
            async for entries in scan(reader, reader.start):
                yield b"".join(e.data for e in entries)
                last = entries[-1].position
                if self.on_entries is not None:
                    self.on_entries(len(entries))
            tail = await reader.read_unconfirmed(last)
            if tail:
                yield b"".join(e.data for e in tail)
            if self.on_entries is not None:
                self.on_entries(len(tail))
        finally:
            await reader.close()

    async def log_end_offset(self, name: str) -> int | None:
        """The offset after a log's last stored batch (None if its bookies cannot say)."""
        try:
            reader = await ManagedLogReader.open(self.meta, self.client, name, self.offloaded)
        except NoSuchLogError:
            return 0
        try:
            return await end_offset_of(reader.metadata, reader.last_entry)
        except LedgerError:
            return None
        finally:
            await reader.close()


async def log_end_offset(meta: MetaStore, peek: LogPeek, topic_id: uuid.UUID, partition: int) -> int | None:
    """The offset after a partition's last stored batch (None if its bookies cannot say)."""
    return await peek.log_end_offset(paths.partition_log_name(topic_id, partition))


async def stored_groups(meta: MetaStore, peek: LogPeek) -> tuple[TopicInfo | None, dict[str, StoredGroup]]:
    """(the offsets topic, every classic group its partitions hold)."""
    topic, groups, _ = await stored_all_groups(meta, peek)
    return topic, groups


async def stored_all_groups(
    meta: MetaStore, peek: LogPeek
) -> tuple[TopicInfo | None, dict[str, StoredGroup], dict[str, StoredShareGroup]]:
    """(the offsets topic, its classic groups, its share groups)."""
    data = await _get(meta, paths.topic(OFFSETS_TOPIC))
    if data is None:
        return None, {}, {}
    topic = TopicInfo.from_bytes(OFFSETS_TOPIC, data)

    async def shard(s: int) -> GroupLogReplay:
        replay = GroupLogReplay(s, skip_unreadable=True)
        async for chunk in peek.batches(paths.partition_log_name(topic.topic_id, s)):
            replay.apply(chunk)
        return replay

    out: dict[str, StoredGroup] = {}
    share: dict[str, StoredShareGroup] = {}
    for replay in await asyncio.gather(*(shard(s) for s in range(topic.partitions))):
        out.update(replay.groups())
        share.update(replay.share_groups())
    return topic, out, share


async def published_offsets(meta: MetaStore) -> dict[str, dict[tuple[uuid.UUID, int], int]]:
    """group -> {(topic id, partition): offset} from the coordinators' /kafka/group-offsets nodes."""
    out: dict[str, dict[tuple[uuid.UUID, int], int]] = {}
    for tid_hex in await _children(meta, GROUP_OFFSETS):
        try:
            tid = uuid.UUID(hex=tid_hex)
        except ValueError:
            continue
        for p in await _children(meta, f"{GROUP_OFFSETS}/{tid_hex}"):
            if not p.isdigit():
                continue
            offsets, _ = await read_group_offsets(meta, tid, int(p))
            for group, off in offsets.items():
                out.setdefault(group, {})[(tid, int(p))] = off
    return out


def decode_assignment(blob: bytes) -> list[Doc] | None:
    """A member's ConsumerProtocolAssignment as [{topic, partitions}]; None if it has none or it
    is not the consumer protocol's."""
    if not blob:
        return None
    try:
        _, a = decode_versioned(schema_class("ConsumerProtocolAssignment"), blob)
    except Exception:
        return None
    parts: list[Any] = getattr(a, "assigned_partitions", [])
    return [{"topic": tp.topic, "partitions": sorted(tp.partitions)} for tp in parts]


async def _coordinators(meta: MetaStore, topic: TopicInfo | None) -> tuple[dict[int, int], dict[int, str]]:
    """(shard -> owner node id, node id -> address)."""
    held = await owners(meta, topic.topic_id) if topic is not None else {}
    nodes = {n.node_id: f"{n.host}:{n.port}" for n in await gateways(meta)}
    return held, nodes


def _group_head(
    group: str,
    stored: StoredGroup | None,
    topic: TopicInfo | None,
    held: dict[int, int],
    nodes: dict[int, str],
) -> Doc:
    shard = shard_for(group, topic.partitions) if topic is not None else None
    node = held.get(shard) if shard is not None else None
    gv = stored.metadata if stored is not None else None
    cg = stored.consumer if stored is not None else None
    if cg is not None:  # the consumer protocol (KIP-848): epochs stand for the generation
        return {
            "group": group,
            "type": "consumer",
            "state": cg.state.value,
            "protocol_type": "consumer",
            "protocol": preferred_assignor(cg.members.values()) or "uniform",
            "generation": cg.group_epoch,
            "leader": None,
            "member_count": len(cg.members),
            "shard": shard,
            "coordinator": node,
            "coordinator_address": nodes.get(node) if node is not None else None,
        }
    return {
        "group": group,
        "type": "classic",
        "state": stored.state if stored is not None else None,
        "protocol_type": (gv.protocol_type or None) if gv is not None else None,
        "protocol": gv.protocol if gv is not None else None,
        "generation": gv.generation if gv is not None else None,
        "leader": gv.leader if gv is not None else None,
        "member_count": len(gv.members) if gv is not None else 0,
        "shard": shard,
        "coordinator": node,
        "coordinator_address": nodes.get(node) if node is not None else None,
    }


def _share_head(group: str, sg: StoredShareGroup, topic: TopicInfo | None, held: dict[int, int],
                nodes: dict[int, str]) -> Doc:
    doc = _group_head(group, None, topic, held, nodes)
    doc.update(
        type="share",
        state="Stable" if sg.members else "Empty",
        protocol_type="share",
        generation=sg.metadata.epoch if sg.metadata is not None else None,
        member_count=len(sg.members),
    )
    return doc


async def list_groups(meta: MetaStore, peek: LogPeek) -> list[Doc]:
    """Every group the offsets topic holds (or a coordinator published offsets for), share
    groups included (type "share", their group epoch as the generation)."""
    topic, stored, share = await stored_all_groups(meta, peek)
    published = await published_offsets(meta)
    held, nodes = await _coordinators(meta, topic)
    names = sorted(set(stored) | set(published) | set(share))
    return [_share_head(g, share[g], topic, held, nodes) if g in share
            else _group_head(g, stored.get(g), topic, held, nodes) for g in names]


async def describe_share_group(meta: MetaStore, peek: LogPeek, group: str) -> Doc | None:
    """A share group: its stored members and, per partition its owner published a state for,
    the share-partition start offset (SPSO), the records in flight (acquired now), those
    finished after the SPSO (acknowledged or archived), the backlog still to deliver, and the
    log-end offset. None if there is no such share group."""
    topic, _, share = await stored_all_groups(meta, peek)
    states: dict[TopicPartition, list[int]] = {}
    by_id = {t.topic_id: t for t in await topics(meta)}
    for tid, p in await published_partitions(meta):
        st = (await read_partition_states(meta, tid, p)).get(group)
        if st is not None and tid in by_id:
            states[(by_id[tid].name, p)] = st
    sg = share.get(group)
    if sg is None and not states:
        return None
    held, nodes = await _coordinators(meta, topic)
    doc = _share_head(group, sg or StoredShareGroup(group, -1), topic, held, nodes)
    members = [
        {"member_id": mid, "client_id": m.client_id, "client_host": m.client_host, "rack_id": m.rack_id,
         "subscribed": sorted(m.subscribed_topic_names)}
        for mid, m in sorted((sg.members if sg is not None else {}).items())
    ]
    rows: list[Doc] = []
    for (name, p), (spso, lag, in_flight, finished) in sorted(states.items()):
        info = next(t for t in by_id.values() if t.name == name)
        rows.append({
            "topic": name, "partition": p, "start_offset": spso, "in_flight": in_flight, "finished": finished,
            "backlog": lag, "log_end_offset": await log_end_offset(meta, peek, info.topic_id, p),
        })
    doc.update(members=members, partitions=rows, total_lag=sum(int(r["backlog"]) for r in rows))
    return doc


async def describe_group(meta: MetaStore, peek: LogPeek, group: str) -> Doc | None:
    """One group: its members with their assignments, and per partition the committed offset,
    the log-end offset, the lag, the offset its coordinator published and whether the
    partition's log holds the group's durable cursor. None if the group is unknown."""
    topic, stored_all = await stored_groups(meta, peek)
    stored = stored_all.get(group)
    by_id = {t.topic_id: t for t in await topics(meta)}
    by_name = {t.name: t for t in by_id.values()}
    published = {
        (by_id[tid].name, p): off
        for (tid, p), off in (await published_offsets(meta)).get(group, {}).items()
        if tid in by_id
    }
    if stored is None and not published:
        return None
    held, nodes = await _coordinators(meta, topic)
    doc = _group_head(group, stored, topic, held, nodes)
    owner_of: dict[TopicPartition, Doc] = {}
    members = []
    for m in stored.metadata.members if stored is not None and stored.metadata is not None else []:
        assignment = decode_assignment(m.assignment)
        md: Doc = {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "session_timeout_ms": m.session_timeout,
            "assignment": assignment,
        }
        members.append(md)
        for a in assignment or []:
            for p in a["partitions"]:
                owner_of[(a["topic"], p)] = md
    for cm in stored.consumer.members.values() if stored is not None and stored.consumer is not None else []:
        md = {
            "member_id": cm.member_id,
            "group_instance_id": cm.instance_id,
            "client_id": cm.client_id,
            "client_host": cm.client_host,
            "session_timeout_ms": None,
            "member_epoch": cm.member_epoch,
            "assignment": [{"topic": by_id[t].name, "partitions": sorted(ps)}
                           for t, ps in sorted(cm.assigned.items()) if t in by_id],
        }
        members.append(md)
        for a in md["assignment"]:
            for p in a["partitions"]:
                owner_of[(a["topic"], p)] = md
    committed = {tp: v.offset for tp, v in stored.offsets.items()} if stored is not None else {}

    async def row(tp: TopicPartition) -> Doc:
        info = by_name.get(tp[0])
        leo = None
        cursor = False
        if info is not None and 0 <= tp[1] < info.partitions:
            leo = await log_end_offset(meta, peek, info.topic_id, tp[1])
            names = await _children(meta, cursors_path(paths.partition_log_name(info.topic_id, tp[1])))
            cursor = encode_name(CURSOR_PREFIX + group) in names
        off = committed.get(tp)
        owner = owner_of.get(tp)
        return {
            "topic": tp[0],
            "partition": tp[1],
            "committed_offset": off,
            "log_end_offset": leo,
            "lag": leo - off if leo is not None and off is not None else None,
            "published_offset": published.get(tp),
            "durable_cursor": cursor,
            "member_id": owner["member_id"] if owner is not None else None,
            "client_id": owner["client_id"] if owner is not None else None,
            "client_host": owner["client_host"] if owner is not None else None,
        }

    tps = sorted(set(committed) | set(published) | set(owner_of))
    rows = list(await asyncio.gather(*(row(tp) for tp in tps)))
    doc.update(
        members=members,
        partitions=rows,
        total_lag=sum(r["lag"] for r in rows if r["lag"] is not None),
    )
    return doc
