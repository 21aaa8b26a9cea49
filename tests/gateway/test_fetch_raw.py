"""Fetch on the wire: sessionless answers, long polls woken by appends, errors, byte limits."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from kafka_wire.errors import ErrorCode
from kafka_wire.messages.fetch import FetchRequest
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.records import RecordBatch, iter_batches
from tests.gateway.test_produce_raw import (
    Raw,
    batch,
    create_topic,
    fetch_request,
    produce_one,
    produce_request,
)
from tests.support.gateway import StandaloneGateway


@pytest.fixture
def raw(module_standalone: StandaloneGateway) -> Iterator[Raw]:
    r = Raw(module_standalone.bootstrap)
    yield r
    r.close()


def test_fetch_sessions_long_poll_and_errors(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "raw-fetch")
    md = raw.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="raw-fetch")]), 12)
    tid = md.topics[0].topic_id
    # an unknown session: the client is told to start over (sessions: test_fetch_sessions.py)
    resp = raw.call(fetch_request("raw-fetch", 0, session_id=77, session_epoch=3), 12)
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # a full sessionless request (epoch -1)
    resp = raw.call(fetch_request("raw-fetch", 0), 12)
    assert (resp.error_code, resp.session_id) == (0, 0)
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (0, 0, 0)
    # v13+: by topic id; unknown ids are UNKNOWN_TOPIC_ID
    resp = raw.call(fetch_request(uuid.uuid4(), 0), 13)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    # beyond the high watermark
    resp = raw.call(fetch_request(tid, 5), 15)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # a long poll is answered when a produce arrives (a plain read after the wait would be empty)
    other = Raw(module_standalone.bootstrap)
    try:
        timer = threading.Timer(0.5, lambda: produce_one(other, "raw-fetch", batch(2)))
        timer.start()
        resp = raw.call(fetch_request(tid, 0, max_wait_ms=20000, min_bytes=1), 16)
        timer.join()
    finally:
        other.close()
    part = resp.responses[0].partitions[0]
    assert part.high_watermark == 2
    data = bytes(part.records)
    assert [b.base_offset for b in iter_batches(data)] == [0]
    RecordBatch(data).validate(from_client=False)




def _whole_batches(data: bytes) -> list[RecordBatch]:
    out = []
    pos = 0
    while len(data) - pos >= 61:
        b = RecordBatch(data, pos)
        if b.end > len(data):
            break
        out.append(b)
        pos = b.end
    return out


def test_byte_limits_follow_kafka(module_standalone: StandaloneGateway, raw: Raw) -> None:
    create_topic(module_standalone.bootstrap, "raw-limits", partitions=2)
    size = len(batch(1, value=b"x" * 1000))
    for part in (0, 1):
        for _ in range(3):
            r = raw.call(produce_request("raw-limits", batch(1, value=b"x" * 1000), partition=part), 9)
            assert r.responses[0].partition_responses[0].error_code == 0
    req = fetch_request("raw-limits", 0)
    req.topics[0].partitions.append(FetchRequest.FetchPartition(partition=1, fetch_offset=0,
                                                                partition_max_bytes=1 << 20))
    # total limit smaller than one batch: the first partition still gets one whole batch
    req.max_bytes = 10
    parts = raw.call(req, 12).responses[0].partitions
    assert [len(bytes(p.records or b"")) for p in parts] == [size, 0]
    # room for one and a half batches: one whole batch, then the cut start of the next
    req.max_bytes = size + size // 2
    parts = raw.call(req, 12).responses[0].partitions
    data = bytes(parts[0].records)
    assert len(data) == size + size // 2 and len(_whole_batches(data)) == 1
    assert len(bytes(parts[1].records or b"")) == 0
    # per-partition limits, every version from 4
    req.max_bytes = 50 << 20
    for p in req.topics[0].partitions:
        p.partition_max_bytes = 2 * size
    for v in range(4, 19):
        if v >= 13:
            continue
        parts = raw.call(req, v).responses[0].partitions
        assert [len(_whole_batches(bytes(p.records))) for p in parts] == [2, 2], v
        assert [p.high_watermark for p in parts] == [3, 3]
