"""Glue between the gateway and coordinator/txn: the `__transaction_state` topic, one
TxnCoordinator per shard this gateway owns (the machinery groups use, gateway/coordinator_shards.py),
the timeout and expiry rounds, and the two ways markers reach a partition: appended here when
this gateway owns the partition, else a WriteTxnMarkers request to its owner."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from coordinator.txn.config import TRANSACTION_STATE_TOPIC, TxnConfig
from coordinator.txn.coordinator import TxnCoordinator, TxnMarkers
from coordinator.txn.state import TopicPartition
from gateway.coordinator_shards import CoordinatorShards
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from gateway.partition.markers import write_marker
from gateway.peers import PeerClients, PeerError
from kafka_log.txn import TxnVerifier
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kafka_wire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

if TYPE_CHECKING:
    from gateway.cluster.membership import GatewayNode
    from gateway.groups import GroupCoordinators
    from gateway.host import GatewayHost
    from gateway.partition.log import PartitionLog

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1


def txn_topic_configs(config: TxnConfig) -> dict[str, str | None]:
    # Compacted like the offsets topic, so a takeover replays a bounded log.
    return {"cleanup.policy": "compact", "segment.bytes": str(config.state_log_segment_bytes)}


class TxnCoordinators(CoordinatorShards[TxnCoordinator]):
    """All transaction-coordinator shards of one gateway process."""

    topic_name = TRANSACTION_STATE_TOPIC
    what = "transaction"

    def __init__(self, services: GatewayHost, groups: GroupCoordinators | None) -> None:
        self.config: TxnConfig = services.config.txn
        self.groups = groups  # the group shards, told of markers landing on __consumer_offsets
        super().__init__(services, self.config.state_log_num_partitions, txn_topic_configs(self.config),
                         self.config.load_wait_s)
        self.peers = PeerClients()
        self._task: asyncio.Task[None] | None = None

    def make(self, shard: int, plog: PartitionLog) -> TxnCoordinator:
        return TxnCoordinator(shard, self.shard_log(plog), self.config, coordinator_epoch=plog.leader_epoch,
                              producer_ids=self.services.producer_ids.next, send_markers=self.send_markers)

    def start(self) -> None:
        """Start the rounds aborting timed-out transactions and expiring idle transactional ids."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._rounds())

    async def _rounds(self) -> None:
        interval = self.config.abort_timed_out_interval_ms / 1000
        last_expiry = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            try:
                for c in self.loaded():
                    await c.abort_timed_out()
                if time.monotonic() - last_expiry >= self.config.remove_expired_interval_ms / 1000:
                    last_expiry = time.monotonic()
                    for c in self.loaded():
                        await c.expire_transactional_ids()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction timeout round failed")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        for c in self.loaded():
            await c.close()
        await self.close_shards()
        await self.peers.close()

    # ---- markers --------------------------------------------------------------------------

    async def send_markers(self, markers: TxnMarkers) -> dict[TopicPartition, int]:
        """One attempt at writing `markers` on each of its partitions (the coordinator retries
        what failed): here for partitions this gateway owns or is assigned, else through the
        owner's WriteTxnMarkers."""
        services = self.services
        out: dict[TopicPartition, int] = {}
        remote: dict[int, list[TopicPartition]] = defaultdict(list)
        local: list[TopicPartition] = []
        topics = TopicCache(services.topics, services.partitions)
        for tp in markers.partitions:
            topic = await topics.by_name(tp[0])
            if topic is None or not 0 <= tp[1] < topic.partitions:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            owner = services.cluster.leader_of(topic.topic_id, tp[1])
            if owner is not None and owner != services.node_id:
                remote[owner].append(tp)
            else:
                local.append(tp)  # ours, or free (taken now if assigned here)
        written, answered = await asyncio.gather(
            asyncio.gather(*(write_marker(topics, self.groups, t, p, markers.producer_id, markers.producer_epoch, markers.commit,
                                          markers.coordinator_epoch, max(markers.transaction_version, 1))
                             for t, p in local)),
            asyncio.gather(*(self._remote(node_id, markers, tps) for node_id, tps in remote.items())),
        )
        for tp, code in zip(local, written, strict=True):
            out[tp] = code
        for r in answered:
            out.update(r)
        return out

    async def _remote(self, node_id: int, markers: TxnMarkers, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        node: GatewayNode | None = self.services.cluster.node(node_id)
        failed = dict.fromkeys(tps, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if node is None:
            return failed
        by_topic: dict[str, list[int]] = defaultdict(list)
        for name, index in tps:
            by_topic[name].append(index)
        req = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=markers.producer_id, producer_epoch=markers.producer_epoch,
            transaction_result=markers.commit, coordinator_epoch=markers.coordinator_epoch,
            transaction_version=markers.transaction_version,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=name, partition_indexes=ps)
                    for name, ps in by_topic.items()],
        )])
        try:
            resp = await self.peers.request(node, "WriteTxnMarkers", WRITE_TXN_MARKERS_VERSION, req)
        except PeerError as e:
            log.info("markers to gateway %d failed: %s", node_id, e)
            return failed
        assert isinstance(resp, WriteTxnMarkersResponse)
        out = dict(failed)
        for m in resp.markers:
            for rt in m.topics:
                for rp in rt.partitions:
                    if (rt.name, rp.partition_index) in out:
                        out[(rt.name, rp.partition_index)] = rp.error_code
        return out


ADD_PARTITIONS_BROKER_VERSION = 5  # the partition owner's form (KIP-890): verify-only or implicit add


async def check_partitions_in_txn(
    txns: TxnCoordinators, node_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
    partitions: set[TopicPartition], *, add: bool = False,
) -> dict[TopicPartition, int]:
    """Ask the transaction's coordinator whether `partitions` are in the producer's open
    transaction (KIP-890 part 1 verification), or, with `add`, to add them (transaction version
    2's implicit add on produce). In process when this gateway coordinates the transaction,
    else AddPartitionsToTxn v5 to the coordinator; a coordinator that cannot be reached gives
    COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR (retriable for the producer)."""
    try:
        node = await txns.find(transactional_id)
    except KafkaApiError as e:
        return dict.fromkeys(partitions, e.error_code)
    if node.node_id == node_id:
        try:
            c = await txns.coordinator_for(transactional_id)
        except KafkaApiError as e:
            return dict.fromkeys(partitions, e.error_code)
        if add:
            err = await c.add_partitions(transactional_id, producer_id, producer_epoch, partitions, client_version=2,
                                         retry_after_completion=True)
            return dict.fromkeys(partitions, err)
        return c.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    by_topic: dict[str, list[int]] = defaultdict(list)
    for name, index in sorted(partitions):
        by_topic[name].append(index)
    req = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        verify_only=not add,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name, partitions=ps)
                for name, ps in by_topic.items()],
    )])
    try:
        resp = await txns.peers.request(node, "AddPartitionsToTxn", ADD_PARTITIONS_BROKER_VERSION, req)
    except PeerError:
        return dict.fromkeys(partitions, int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    assert isinstance(resp, AddPartitionsToTxnResponse)
    out = dict.fromkeys(partitions, int(resp.error_code or ErrorCode.UNKNOWN_SERVER_ERROR))
    for result in resp.results_by_transaction:
        for t in result.topic_results:
            for p in t.results_by_partition:
                if (t.name, p.partition_index) in out:
                    out[(t.name, p.partition_index)] = p.partition_error_code
    return out


def txn_verifier(txns: TxnCoordinators, node_id: int) -> TxnVerifier:
    """The produce path's TxnVerifier (kafka_log/txn.py) over this gateway's coordinators."""

    async def verify(transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[TopicPartition],
                     add_partition: bool) -> dict[TopicPartition, ErrorCode]:
        codes = await check_partitions_in_txn(txns, node_id, transactional_id, producer_id, producer_epoch,
                                              partitions, add=add_partition)
        return {tp: ErrorCode(code) for tp, code in codes.items()}

    return verify
