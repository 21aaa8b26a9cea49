"""Quire's internal import (gateway/imports.py) on the wire: refused unless the gateway runs
with quire.import.enable; with it, batches land at their own offsets, never below the end, and
ordinary producers continue after them."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from gateway.imports import IMPORT_DISABLED
from kafka_wire.errors import ErrorCode
from kafka_wire.records import NewRecord, build_batch
from pipeline.kafka_client import LATEST, Connection, KafkaError
from tests.gateway.test_produce_raw import create_topic
from tests.support.gateway import StandaloneFactory, StandaloneGateway


def at(base: int, *values: bytes) -> bytes:
    return build_batch([NewRecord(None, v, (), 1000 + i) for i, v in enumerate(values)], base_offset=base)


def test_import_is_refused_without_the_flag(module_standalone: StandaloneGateway) -> None:
    create_topic(module_standalone.bootstrap, "no-import")
    with Connection(module_standalone.bootstrap) as c, pytest.raises(KafkaError) as ei:
        c.import_batches("no-import", 0, at(5, b"x"))
    assert ei.value.code == ErrorCode.INVALID_REQUEST and IMPORT_DISABLED in str(ei.value)
    with Connection(module_standalone.bootstrap) as c:
        assert c.list_offset("no-import", 0, LATEST) == 0  # nothing appended


def test_import_keeps_offsets_and_refuses_going_back(standalone_factory: StandaloneFactory) -> None:
    gw = standalone_factory(extra_args=["--import-enable"])
    create_topic(gw.bootstrap, "imp")
    with Connection(gw.bootstrap) as c:
        assert c.import_batches("imp", 0, at(3, b"a", b"b") + at(10, b"c")) == 10
        with pytest.raises(KafkaError) as ei:
            c.import_batches("imp", 0, at(7, b"late"))
        assert ei.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert c.list_offset("imp", 0, LATEST) == 11
    p = Producer({"bootstrap.servers": gw.bootstrap})
    p.produce("imp", value=b"d", partition=0)
    assert p.flush(30) == 0
    cons = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "imp-check", "enable.partition.eof": True})
    try:
        cons.assign([TopicPartition("imp", 0, 0)])
        got = []
        while True:
            m = cons.poll(15)
            assert m is not None
            if m.error() is not None:
                break
            got.append((m.offset(), m.value()))
    finally:
        cons.close()
    assert got == [(3, b"a"), (4, b"b"), (10, b"c"), (11, b"d")]


def test_pipelined_imports_apply_in_order_and_a_refused_one_refuses_the_rest(
        standalone_factory: StandaloneFactory) -> None:
    gw = standalone_factory(extra_args=["--import-enable"])
    create_topic(gw.bootstrap, "piped")
    with Connection(gw.bootstrap) as c:
        end = 0
        for i in range(8):  # all sent before any answer is read, a gap between each
            c.send_import("piped", 0, at(10 * i + 2, b"a%d" % i, b"b%d" % i), expected_end=end)
            end = 10 * i + 4
        assert c.unanswered == 8
        assert [c.receive_import("piped", 0) for _ in range(8)] == [10 * i + 2 for i in range(8)]
        assert c.list_offset("piped", 0, LATEST) == end
        # one expecting the wrong end is refused; the next, expecting the end after it, is refused
        # too: nothing lands beyond the hole the first would have filled
        c.send_import("piped", 0, at(100, b"x"), expected_end=end + 1)
        c.send_import("piped", 0, at(101, b"y"), expected_end=101)
        for _ in range(2):
            with pytest.raises(KafkaError) as ei:
                c.receive_import("piped", 0)
            assert ei.value.code == ErrorCode.OFFSET_OUT_OF_RANGE and f"ends at {end}" in str(ei.value)
        assert c.import_batches("piped", 0, at(100, b"x"), expected_end=end) == 100
        assert c.list_offset("piped", 0, LATEST) == 101
