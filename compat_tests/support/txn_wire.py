"""A producer's transaction driven request by request over the raw wire (compat_tests.support.wire),
at transaction version 1's request versions: what the differential runs and the tool tests use
to reach states clients avoid (misuse, a transaction left hanging)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations
from compat_tests.support.wire import RETRIABLE_COORDINATOR, Wire
from kafka_wire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kafka_wire.messages.add_partitions_to_txn import AddPartitionsToTxnRequest as APT
from kafka_wire.messages.describe_transactions import DescribeTransactionsRequest
from kafka_wire.messages.end_txn import EndTxnRequest
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from kafka_wire.messages.init_producer_id import InitProducerIdRequest
from kafka_wire.messages.produce import ProduceRequest as P
from kafka_wire.messages.txn_offset_commit import TxnOffsetCommitRequest as TOC
from kafka_wire.records.builder import NewRecord, build_batch

INIT = (22, 4)
ADD_PARTITIONS = (24, 3)
ADD_PARTITIONS_V1 = (24, 1)
ADD_OFFSETS = (25, 3)
END_TXN = (26, 3)
TXN_OFFSET_COMMIT = (28, 3)
TXN_OFFSET_COMMIT_V6 = (28, 6)
DESCRIBE_TXNS = (65, 0)
LIST_TXNS = (66, 1)
PRODUCE_TV1 = (0, 11)


def _retrying(call: Any, code_of: Any = lambda r: int(r.error_code)) -> Any:
    deadline = time.monotonic() + 60
    while True:
        r = call()
        if code_of(r) not in RETRIABLE_COORDINATOR | {51} or time.monotonic() > deadline:  # 51 CONCURRENT_TRANSACTIONS
            return r
        time.sleep(0.1)


class Txn:
    def __init__(self, w: Wire, tid: str) -> None:
        self.w, self.tid = w, tid
        self.pid, self.epoch = -1, -1

    def find(self) -> int:
        return self.find_coordinator()[0]

    def find_coordinator(self) -> tuple[int, str]:
        """(error code, host:port of the transaction's coordinator)."""
        r = _retrying(lambda: self.w.call((10, 4), FindCoordinatorRequest(key_type=1, coordinator_keys=[self.tid])),
                      lambda r: int(r.coordinators[0].error_code))
        c = r.coordinators[0]
        return int(c.error_code), f"{c.host}:{c.port}"

    def init(self, timeout_ms: int = 60000, tid: str | None = None) -> tuple[int, int]:
        r = _retrying(lambda: self.w.call(INIT, InitProducerIdRequest(
            transactional_id=self.tid if tid is None else tid, transaction_timeout_ms=timeout_ms)))
        if r.error_code == 0 and tid is None:
            self.pid, self.epoch = int(r.producer_id), int(r.producer_epoch)
        return int(r.error_code), int(r.producer_epoch)

    def add(self, partitions: dict[str, list[int]], *, epoch: int | None = None, pid: int | None = None,
            api: tuple[int, int] = ADD_PARTITIONS) -> dict[str, list[int]]:
        r = self.w.call(api, APT(
            v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid if pid is None else pid,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in partitions.items()]))
        names = {t: f"topic{i}" for i, t in enumerate(partitions)}  # names are unique per run
        return {names[t.name]: [int(p.partition_error_code)
                                for p in sorted(t.results_by_partition, key=lambda p: p.partition_index)]
                for t in r.results_by_topic_v3_and_below}

    def end(self, commit: bool, *, epoch: int | None = None, pid: int | None = None, tid: str | None = None,
            api: tuple[int, int] = END_TXN) -> int:
        return int(self.w.call(api, EndTxnRequest(
            transactional_id=self.tid if tid is None else tid, producer_id=self.pid if pid is None else pid,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit)).error_code)

    def produce(self, topic: str, partition: int, seq: int, api: tuple[int, int] = PRODUCE_TV1) -> int:
        records = build_batch([NewRecord(b"k", b"v")], producer_id=self.pid, producer_epoch=self.epoch,
                              base_sequence=seq, transactional=True)
        r = self.w.call(api, P(transactional_id=self.tid, acks=-1, timeout_ms=30000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])]))
        return int(r.responses[0].partition_responses[0].error_code)

    def describe(self, tid: str | None = None) -> Any:
        return self.w.call(DESCRIBE_TXNS, DescribeTransactionsRequest(
            transactional_ids=[self.tid if tid is None else tid])).transaction_states[0]

    def wait_state(self, state: str) -> str:
        deadline = time.monotonic() + 30
        while True:
            got = self.describe().transaction_state
            if got == state or time.monotonic() > deadline:
                return str(got)
            time.sleep(0.05)

    def offsets(self, group: str, topic: str, *, epoch: int | None = None, generation: int = -1,
                api: tuple[int, int] = TXN_OFFSET_COMMIT) -> list[int]:
        r = self.w.call(api, TOC(
            transactional_id=self.tid, group_id=group, producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch, generation_id_or_member_epoch=generation,
            member_id="", topics=[TOC.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                TOC.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
        return [int(p.error_code) for t in r.topics for p in t.partitions]

    def offsets_by_id(self, group: str, partitions: dict[uuid.UUID, list[int]], *, generation: int = -1
                      ) -> list[tuple[int, list[tuple[int, int]]]]:
        """TxnOffsetCommit v6 (topics by id, transaction version 2: the offsets partition is
        added by the request): per topic of the response, in its order, (the index of its id in
        `partitions`, [(partition, error)])."""
        r = self.w.call(TXN_OFFSET_COMMIT_V6, TOC(
            transactional_id=self.tid, group_id=group, producer_id=self.pid, producer_epoch=self.epoch,
            generation_id_or_member_epoch=generation, member_id="",
            topics=[TOC.TxnOffsetCommitRequestTopic(topic_id=tid, partitions=[
                TOC.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=1) for p in ps])
                for tid, ps in partitions.items()]))
        ids = list(partitions)
        return [(ids.index(t.topic_id), [(int(p.partition_index), int(p.error_code)) for p in t.partitions])
                for t in r.topics]

    def add_offsets(self, group: str, *, epoch: int | None = None) -> int:
        return int(_retrying(lambda: self.w.call(ADD_OFFSETS, AddOffsetsToTxnRequest(
            transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch if epoch is None else epoch,
            group_id=group))).error_code)


def txn_offset_commit_v6(bootstrap: str) -> Observations:
    """TxnOffsetCommit v6 (KIP-1319) names topics by id; transaction version 2 adds the offsets
    partition (no AddOffsetsToTxn). A missing group with a generation answers
    GROUP_ID_NOT_FOUND at v6 and ILLEGAL_GENERATION before."""
    topic, tid, group = unique("d-txn6"), unique("d-tid6"), unique("d-tg6")
    out: Observations = {}
    with Wire(bootstrap) as w:
        w.create(topic, partitions=2)
        topic_id = w.metadata([topic]).topics[0].topic_id
        out["group_coordinator"] = w.find_coordinator(group)[0]
        t = Txn(w, tid)
        out["find_coordinator"] = t.find()
        out["init"] = t.init()
        unknown = uuid.uuid4()
        out["v6.mixed"] = t.offsets_by_id(group, {topic_id: [0, 1], unknown: [0]})
        out["v6.unknown_partition"] = t.offsets_by_id(group, {topic_id: [7]})
        out["v6.missing_group_with_generation"] = t.offsets_by_id(unique("d-none"), {topic_id: [0]}, generation=3)
        out["v5.missing_group_with_generation"] = t.offsets(unique("d-none"), topic, generation=3, api=(28, 5))
        out["end.commit"] = t.end(True, api=(26, 5))
        deadline = time.monotonic() + 30
        while (fetched := w.fetch_offsets(group, topic, [0, 1])) != {0: (0, 1), 1: (0, 1)} and time.monotonic() < deadline:
            time.sleep(0.05)  # the markers land after EndTxn answers
        out["committed"] = fetched
    return out
