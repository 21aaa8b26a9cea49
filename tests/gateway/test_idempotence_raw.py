"""Idempotent producers on the wire: InitProducerId, duplicates answered with their original
offsets, sequence errors, DescribeProducers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_producers import DescribeProducersRequest
from kafka_wire.messages.init_producer_id import InitProducerIdRequest
from kafka_wire.records import iter_batches
from tests.gateway.test_produce_raw import Raw, batch, create_topic, fetch_request, produce_one
from tests.support.gateway import StandaloneGateway


@pytest.fixture
def raw(module_standalone: StandaloneGateway) -> Iterator[Raw]:
    r = Raw(module_standalone.bootstrap)
    yield r
    r.close()


def test_duplicate_batches_get_their_original_offsets(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "raw-dup")
    pid = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4).producer_id
    assert pid >= 0
    assert produce_one(raw, "raw-dup", batch(2)).base_offset == 0  # a plain batch first
    b0 = batch(3, pid=pid, epoch=0, seq=0)
    b1 = batch(2, pid=pid, epoch=0, seq=3)
    r0 = produce_one(raw, "raw-dup", b0)
    r1 = produce_one(raw, "raw-dup", b1)
    assert (r0.error_code, r0.base_offset, r1.error_code, r1.base_offset) == (0, 2, 0, 5)
    # resending either batch: success with the original offsets, nothing appended
    assert (produce_one(raw, "raw-dup", b0).base_offset, produce_one(raw, "raw-dup", b1).base_offset) == (
        2,
        5,
    )
    gap = produce_one(raw, "raw-dup", batch(1, pid=pid, epoch=0, seq=9))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = produce_one(raw, "raw-dup", batch(1, pid=pid, epoch=0, seq=5))
    assert (nxt.error_code, nxt.base_offset) == (0, 7)
    # everything stored exactly once, offsets dense
    resp = raw.call(fetch_request("raw-dup", 0), 12)
    data = b"".join(bytes(x) for x in [resp.responses[0].partitions[0].records])
    offsets = [o for b in iter_batches(data) for o in range(b.base_offset, b.last_offset + 1)]
    assert offsets == list(range(8))
    # DescribeProducers sees the producer
    dp = raw.call(
        DescribeProducersRequest(
            topics=[DescribeProducersRequest.TopicRequest(name="raw-dup", partition_indexes=[0])]
        ),
        0,
    )
    states = dp.topics[0].partitions[0].active_producers
    assert [(s.producer_id, s.producer_epoch, s.last_sequence) for s in states] == [(pid, 0, 5)]


def test_init_producer_id_with_and_without_transactional_id(raw: Raw) -> None:
    first = raw.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    again = raw.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)
    too_long = raw.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=900_001), 4)
    assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    a = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 0).producer_id
    b = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 2).producer_id
    assert a != b


