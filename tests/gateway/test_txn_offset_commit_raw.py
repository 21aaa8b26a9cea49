"""TxnOffsetCommit v6 (KIP-1319: topics by id) on a standalone, over the wire: the scenario the
differential run compares with Apache Kafka 4.4, with the answers Kafka gave written out."""

from __future__ import annotations

import pytest

from compat_tests.support.txn_wire import txn_offset_commit_v6
from kafka_wire.errors import ErrorCode
from tests.support.gateway import StandaloneGateway

pytestmark = pytest.mark.timeout(120)


def test_txn_offset_commit_v6_by_topic_id(module_standalone: StandaloneGateway) -> None:
    out = txn_offset_commit_v6(module_standalone.bootstrap)
    assert out["init"] == (0, 0)
    # the unknown id first (as Kafka answers), then the known topic's partitions, committed
    assert out["v6.mixed"] == [(1, [(0, ErrorCode.UNKNOWN_TOPIC_ID)]), (0, [(0, 0), (1, 0)])]
    assert out["v6.unknown_partition"] == [(0, [(7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert out["v6.missing_group_with_generation"] == [(0, [(0, ErrorCode.GROUP_ID_NOT_FOUND)])]
    assert out["v5.missing_group_with_generation"] == [ErrorCode.ILLEGAL_GENERATION]
    assert out["end.commit"] == 0
    assert out["committed"] == {0: (0, 1), 1: (0, 1)}
