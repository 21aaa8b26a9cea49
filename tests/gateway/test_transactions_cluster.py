"""Transactions across a partition handover: ZooKeeper, 2 bookies, 2 `quire gateway` processes.
A partition holding an aborted and an open transaction is SIGKILLed away from its owner; the
survivor rebuilds the last stable offset and the aborted-transactions index from the log, the
open transaction's producer goes on, and WriteTxnMarkers for a partition owned elsewhere gets
NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.cluster import inspect, leases
from kafka_wire.errors import ErrorCode
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.gateway.test_failover_cluster import wait_for
from tests.gateway.test_produce_raw import Raw
from tests.gateway.test_transactions_raw import fetch_committed, markers, new_pid, produce, values_batch
from tests.support.cluster import GatewayProc

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
TOPIC = "txn-handover"


async def owners(meta: MetaStore) -> dict[int, int] | None:
    info = await inspect.describe_topic(meta, TOPIC)
    if info is None:
        return None
    tid = uuid.UUID(hex=info["topic_id"])
    held = {p: await leases.lease_holder(meta, tid, p) for p in range(2)}
    return None if any(v is None for v in held.values()) else {p: v for p, v in held.items() if v is not None}


def on(address: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    raw = Raw(address)
    try:
        return fn(raw, *args, **kwargs)
    finally:
        raw.close()


async def test_handover_rebuilds_open_and_aborted_transactions(zookeeper: Any, bookie_cluster: Any,
                                                               tmp_path: Path) -> None:
    url = zookeeper.url()
    await bookie_cluster(2, url)
    # no partition verification: these transactions are no coordinator's (markers sent by hand)
    gateways = {n: GatewayProc(n, url, tmp_path / f"gateway-{n}.log", replication="2/2/2",
                               extra_args=["--no-transaction-partition-verification-enable"]) for n in (1, 2)}
    meta = open_meta(url, session_timeout=5.0)
    await meta.start()
    try:
        for g in gateways.values():
            g.start()
        for g in gateways.values():
            await asyncio.to_thread(g.wait_ready)
        bootstrap = ",".join(g.address for g in gateways.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        await asyncio.to_thread(admin.create_topics([NewTopic(TOPIC, 2, replication_factor=-1)])[TOPIC].result, 30)
        held = await wait_for(lambda: owners(meta), "both partitions owned", within=30)
        owner, other = held[0], 2 if held[0] == 1 else 1  # partition 0: the one the raw helpers address
        addr = gateways[owner].address

        def load(raw: Raw) -> tuple[int, int, int]:
            pid = new_pid(raw)
            produce(raw, TOPIC, values_batch([b"plain-0"]))
            a = produce(raw, TOPIC, values_batch([b"abort-1"], pid=pid, epoch=0, seq=0, transactional=True),
                        txn_id="t")
            assert markers(raw, TOPIC, pid, 0, commit=False) == [0]
            o = produce(raw, TOPIC, values_batch([b"open-1"], pid=pid, epoch=0, seq=1, transactional=True),
                        txn_id="t")
            produce(raw, TOPIC, values_batch([b"plain-after"]))
            return pid, a, o

        pid, aborted_at, open_at = await asyncio.to_thread(on, addr, load)
        # the gateway that does not own the partition refuses its markers
        assert await asyncio.to_thread(on, gateways[other].address, markers, TOPIC, pid, 0, True) == \
            [ErrorCode.NOT_LEADER_OR_FOLLOWER]

        gateways[owner].kill()
        await wait_for(lambda: _held_by(meta, other), "the survivor owns the partition", within=60)
        survivor = gateways[other].address
        p = await asyncio.to_thread(on, survivor, fetch_committed, TOPIC, 0)
        assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, open_at + 2, open_at)
        assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions] == [(pid, aborted_at)]

        def finish(raw: Raw) -> Any:
            produce(raw, TOPIC, values_batch([b"open-2"], pid=pid, epoch=0, seq=2, transactional=True), txn_id="t")
            assert markers(raw, TOPIC, pid, 0, commit=True) == [0]
            return fetch_committed(raw, TOPIC, 0)

        p = await asyncio.to_thread(on, survivor, finish)
        assert p.last_stable_offset == p.high_watermark == open_at + 4
        assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions] == [(pid, aborted_at)]
    finally:
        for g in gateways.values():
            g.kill()
        await meta.close()


async def _held_by(meta: MetaStore, node: int) -> bool:
    held = await owners(meta)
    return held is not None and held[0] == node
