"""Differential runs: the transaction coordinator's answers to misuse (EndTxn without a
transaction, stale epochs, unknown producer ids, a transactional produce to a partition never
added, TxnOffsetCommit without AddOffsetsToTxn and from a fenced producer) and the shapes of
DescribeTransactions and ListTransactions, the same raw requests against Apache Kafka 4.4 and
Quire. Transaction version 1 request versions throughout (EndTxn v3, AddPartitionsToTxn v3), but for
TxnOffsetCommit v6 (topics by id), which is transaction version 2's."""

from __future__ import annotations

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.clients import unique
from compat_tests.support.differential import Observations, run_both
from compat_tests.support.targets import Target
from compat_tests.support.txn_wire import ADD_PARTITIONS_V1, LIST_TXNS, Txn, txn_offset_commit_v6
from compat_tests.support.wire import Wire
from kafka_wire.api import API_NAMES
from kafka_wire.messages.api_versions import ApiVersionsRequest
from kafka_wire.messages.list_transactions import ListTransactionsRequest

pytestmark = pytest.mark.compat(suite="differential", client="raw protocol")


def misuse(bootstrap: str) -> Observations:
    topic, tid, group = unique("d-txn"), unique("d-tid"), unique("d-tg")
    out: Observations = {}
    with Wire(bootstrap) as w:
        w.create(topic, partitions=2)
        out["group_coordinator"] = w.find_coordinator(group)[0]  # the offsets topic is loaded
        t = Txn(w, tid)
        out["find_coordinator"] = t.find()
        out["init.empty_id"] = t.init(tid="")[0]
        out["init.timeout_too_large"] = t.init(timeout_ms=900_001)[0]
        out["init"] = t.init()
        out["end.commit_without_txn"] = t.end(True)
        out["end.abort_without_txn"] = t.end(False)
        out["end.unknown_id"] = t.end(True, tid=unique("d-none"))
        out["end.wrong_producer_id"] = t.end(True, pid=t.pid + 1)
        out["add.unknown_id_mapping"] = t.add({topic: [0]}, pid=t.pid + 1)
        out["add.unknown_topic"] = t.add({topic: [0], unique("d-missing"): [0]})
        out["add.unknown_partition"] = t.add({topic: [0, 5]})
        out["add"] = t.add({topic: [0]})
        out["produce.added"] = t.produce(topic, 0, 0)
        out["produce.not_added"] = t.produce(topic, 1, 0)
        out["produce.not_added_v9"] = t.produce(topic, 1, 0, api=(0, 9))
        out["produce.not_added_v10"] = t.produce(topic, 1, 0, api=(0, 10))
        d = t.describe()
        out["describe.ongoing"] = (int(d.error_code), d.transaction_state, int(d.transaction_timeout_ms),
                                   int(d.producer_id) == t.pid, int(d.producer_epoch),
                                   [(x.topic == topic, list(x.partitions)) for x in d.topics],
                                   int(d.transaction_start_time_ms) > 0)
        lt = w.call(LIST_TXNS, ListTransactionsRequest(state_filters=["Ongoing", "Bogus"],
                                                         producer_id_filters=[t.pid]))
        out["list.filtered"] = (int(lt.error_code), list(lt.unknown_state_filters),
                                [(s.transactional_id == tid, int(s.producer_id) == t.pid, s.transaction_state)
                                 for s in lt.transaction_states])
        out["end.abort_while_ongoing_is_fine"] = t.end(False)
        out["after_abort.state"] = t.wait_state("CompleteAbort")
        out["end.commit_after_abort"] = t.end(True)
        out["end.abort_retry"] = t.end(False)
        # a second InitProducerId fences the first epoch
        old = t.epoch
        out["init.again"] = t.init()
        out["add.stale_epoch"] = t.add({topic: [0]}, epoch=old)
        out["add.stale_epoch_v1"] = t.add({topic: [0]}, epoch=old, api=ADD_PARTITIONS_V1)
        out["end.stale_epoch"] = t.end(True, epoch=old)
        out["add_offsets.stale_epoch"] = t.add_offsets(group, epoch=old)
        out["txn_offset_commit.fenced_producer"] = t.offsets(group, topic, epoch=old)
        out["txn_offset_commit.not_added"] = t.offsets(group, topic)
        out["add_offsets"] = t.add_offsets(group)
        out["txn_offset_commit"] = t.offsets(group, topic)
        out["end.commit"] = t.end(True)
        out["after_commit.state"] = t.wait_state("CompleteCommit")
        out["end.commit_retry"] = t.end(True)
        out["end.abort_after_commit"] = t.end(False)
        unknown = t.describe(unique("d-none"))
        out["describe.unknown"] = (int(unknown.error_code), unknown.transaction_state)
        done = t.describe()
        out["describe.complete"] = (int(done.error_code), done.transaction_state, [x.topic for x in done.topics])
    return out


def test_transaction_misuse_and_shapes(target: Target, apache_kafka: Target, differences: Differences) -> None:
    run_both(differences, target, apache_kafka, misuse)


def test_txn_offset_commit_v6(target: Target, apache_kafka: Target, differences: Differences) -> None:
    got, _ = run_both(differences, target, apache_kafka, txn_offset_commit_v6)
    assert got["committed"] == {0: (0, 1), 1: (0, 1)}, got


TXN_APIS = ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
            "WriteTxnMarkers", "DescribeTransactions", "ListTransactions", "DescribeProducers")


def txn_api_versions(bootstrap: str) -> Observations:
    """The versions ApiVersions advertises for the transaction APIs."""
    with Wire(bootstrap) as w:
        r = w.call((18, 3), ApiVersionsRequest(client_software_name="quire-compat", client_software_version="1"))
    served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    return {name: served.get(API_NAMES[name].api_key) for name in TXN_APIS}


def test_transaction_api_versions(target: Target, apache_kafka: Target, differences: Differences) -> None:
    got, _ = run_both(differences, target, apache_kafka, txn_api_versions)
    assert got["TxnOffsetCommit"] == (0, 6), got
