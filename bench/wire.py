"""Benchmark of the Kafka wire hot path (kafka_wire.hotpath + kafka_wire.records).

produce_decode: decode a Produce request (v10) carrying 1 MiB of record batches (64 batches of
16 KiB, one per partition as Kafka requires), validate each batch (sizes, magic, CRC32C,
counts) and patch its base offset and leader epoch in place.
fetch_encode: build and encode a Fetch response (v12) carrying 1 MiB of stored batches (64
partitions x 16 KiB), joined into one bytes (the single copy a socket write needs).

The same work is done with kafka-python 3.0.12's own classes: ProduceRequest.decode,
DefaultRecordBatch.validate_crc (records come back as immutable bytes, so patching needs a
bytearray copy) and FetchResponse(...).encode. vs_kafka_python is the smaller of the two
speed-up ratios against these (the classes kafka-python 3.0.12's own client uses), so the
headline never flatters the slower path. Its pre-3.0 pure-Python classes (kafka.protocol.old)
are timed too and printed for reference only.

On the 20x target: kafka-python 3.x decodes with compiled per-schema codecs and checks CRCs
with the same C crc32c package, and with 16 KiB batches both sides are dominated by the
CRC32C pass over 1 MiB, which neither can skip. The script prints that floor and the ratio it
allows ("crc-only ceiling"): no implementation that validates CRCs can beat it.

Run: python3 bench/wire.py
"""

from __future__ import annotations

import os
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c
from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kafka.protocol.old.fetch import FetchResponse_v11 as OldFetchResponse
from kafka.protocol.old.produce import ProduceRequest_v8 as OldProduceRequest
from kafka.protocol.producer import ProduceRequest as KpProduceRequest
from kafka.record.default_records import DefaultRecordBatch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_wire.hotpath import (
    FetchPartition,
    FetchTopic,
    decode_produce_request,
    encode_fetch_response,
)
from kafka_wire.records import NewRecord, build_batch, validate_produce_records

PRODUCE_VERSION = 10
FETCH_VERSION = 12
N_BATCHES = 64
BATCH_BYTES = 16 * 1024
TOPICS = [f"bench-topic-{i}" for i in range(4)]


def make_batches() -> list[bytes]:
    out = []
    for i in range(N_BATCHES):
        recs = [
            NewRecord(b"key-%d" % j, os.urandom(1000), [("h", b"v")], 1_700_000_000_000 + j)
            for j in range(16)
        ]
        b = build_batch(recs, producer_id=1000 + i, producer_epoch=0, base_sequence=0)
        pad = BATCH_BYTES - len(b)  # grow the last value so each batch is exactly 16 KiB
        recs[-1] = recs[-1]._replace(value=recs[-1].value + os.urandom(pad)) if recs[-1].value else recs[-1]
        b = build_batch(recs, producer_id=1000 + i, producer_epoch=0, base_sequence=0)
        out.append(b)
    return out


def produce_request(batches: list[bytes], version: int = PRODUCE_VERSION) -> bytes:
    T, P = KpProduceRequest.TopicProduceData, KpProduceRequest.TopicProduceData.PartitionProduceData
    per = N_BATCHES // len(TOPICS)
    topics = [
        T(name=t, partition_data=[P(index=j, records=batches[i * per + j]) for j in range(per)])
        for i, t in enumerate(TOPICS)
    ]
    return bytes(
        KpProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=topics).encode(
            version=version
        )
    )


def best(fn: Callable[[], object], loops: int, repeats: int = 7) -> float:
    """Seconds per call, best of `repeats` runs of `loops` calls."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - t0) / loops)
    return min(times)


def main() -> None:
    batches = make_batches()
    assert all(len(b) == BATCH_BYTES for b in batches), [len(b) for b in batches]
    payload = sum(len(b) for b in batches)
    request = bytearray(produce_request(batches))  # a server reads into a writable buffer

    def ours_produce() -> None:
        req = decode_produce_request(request, PRODUCE_VERSION)
        offset = 0
        for p in req.partitions:
            batch = validate_produce_records(p.records, PRODUCE_VERSION)
            batch.set_base_offset(offset)
            batch.set_partition_leader_epoch(7)
            offset += batch.record_count

    frozen = bytes(request)

    def kp_produce() -> None:
        req = KpProduceRequest.decode(frozen, version=PRODUCE_VERSION)
        offset = 0
        for t in req.topic_data:
            for p in t.partition_data:
                batch = DefaultRecordBatch(p.records)
                if not batch.validate_crc():
                    raise ValueError("crc")
                buf = bytearray(p.records)
                struct.pack_into(">q", buf, 0, offset)
                struct.pack_into(">i", buf, 12, 7)
                offset += batch.records_count

    per = N_BATCHES // len(TOPICS)

    def ours_fetch() -> bytes:
        topics = [
            FetchTopic(
                t,
                [
                    FetchPartition(j, 0, 1_000_000, 1_000_000, 0, None, -1, [batches[i * per + j]])
                    for j in range(per)
                ],
            )
            for i, t in enumerate(TOPICS)
        ]
        return b"".join(encode_fetch_response(FETCH_VERSION, topics, session_id=1))

    R, PD = KpFetchResponse.FetchableTopicResponse, KpFetchResponse.FetchableTopicResponse.PartitionData

    def kp_fetch() -> bytes:
        topics = [
            R(
                topic=t,
                partitions=[
                    PD(
                        partition_index=j,
                        error_code=0,
                        high_watermark=1_000_000,
                        last_stable_offset=1_000_000,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=batches[i * per + j],
                    )
                    for j in range(per)
                ],
            )
            for i, t in enumerate(TOPICS)
        ]
        resp = KpFetchResponse(throttle_time_ms=0, error_code=0, session_id=1, responses=topics)
        return bytes(resp.encode(version=FETCH_VERSION))

    assert ours_fetch() == kp_fetch(), "hot-path Fetch bytes differ from kafka-python's"

    # kafka-python 3.0.12 also ships its pre-3.0 pure-Python classes (kafka.protocol.old, up to
    # Produce v8 / Fetch v11); shown for reference, not used in the headline ratio.
    legacy_request = bytes(produce_request(batches, version=8))
    legacy_body = legacy_request

    def old_produce() -> None:
        req = OldProduceRequest.decode(legacy_body)
        offset = 0
        for _name, partitions in req.topic_data:
            for _index, records in partitions:
                batch = DefaultRecordBatch(records)
                if not batch.validate_crc():
                    raise ValueError("crc")
                buf = bytearray(records)
                struct.pack_into(">q", buf, 0, offset)
                struct.pack_into(">i", buf, 12, 7)
                offset += batch.records_count

    def old_fetch() -> bytes:
        topics = [
            (t, [(j, 0, 1_000_000, 1_000_000, 0, None, -1, batches[i * per + j]) for j in range(per)])
            for i, t in enumerate(TOPICS)
        ]
        return bytes(OldFetchResponse(0, 0, 1, topics).encode())

    def ours_fetch_v11() -> bytes:
        topics = [
            FetchTopic(
                t,
                [
                    FetchPartition(j, 0, 1_000_000, 1_000_000, 0, None, -1, [batches[i * per + j]])
                    for j in range(per)
                ],
            )
            for i, t in enumerate(TOPICS)
        ]
        return b"".join(encode_fetch_response(11, topics, session_id=1))

    assert ours_fetch_v11() == old_fetch(), (
        "hot-path Fetch v11 bytes differ from kafka-python's legacy classes"
    )

    crc_regions = [
        p.records[21:] for p in decode_produce_request(request, PRODUCE_VERSION).partitions if p.records
    ]

    def crc_only() -> None:
        for region in crc_regions:
            crc32c(region)

    t_crc = best(crc_only, 200)
    t_oldp = best(old_produce, 10)
    t_oldf = best(old_fetch, 10)
    t_of11 = best(ours_fetch_v11, 200)
    mb = payload / 1e6
    t_op = best(ours_produce, 200)
    t_kp = best(kp_produce, 20)
    t_of = best(ours_fetch, 200)
    t_kf = best(kp_fetch, 20)
    produce_mbps = mb / t_op
    fetch_mbps = mb / t_of
    r_produce = t_kp / t_op
    r_fetch = t_kf / t_of
    print(f"payload: {N_BATCHES} batches x {BATCH_BYTES} B = {payload} B")
    print(f"produce decode+validate+patch  quire: {t_op * 1e6:8.1f} us  {produce_mbps:8.0f} MB/s")
    print(
        f"                        kafka-python: {t_kp * 1e6:8.1f} us  {mb / t_kp:8.0f} MB/s  ratio {r_produce:.1f}x"
    )
    print(f"fetch encode (joined)          quire: {t_of * 1e6:8.1f} us  {fetch_mbps:8.0f} MB/s")
    print(
        f"                        kafka-python: {t_kf * 1e6:8.1f} us  {mb / t_kf:8.0f} MB/s  ratio {r_fetch:.1f}x"
    )
    print(
        f"crc-only floor: {t_crc * 1e6:8.1f} us -> produce ratio ceiling vs kafka-python {t_kp / t_crc:.1f}x"
    )
    print(
        f"legacy kafka.protocol.old:  produce v8 {t_oldp * 1e6:8.1f} us  ratio {t_oldp / t_op:.1f}x   "
        f"fetch v11 {t_oldf * 1e6:8.1f} us  ratio {t_oldf / t_of11:.1f}x (not in the headline)"
    )
    print(
        f"BENCH wire produce_decode_MBps={produce_mbps:.0f} fetch_encode_MBps={fetch_mbps:.0f} "
        f"vs_kafka_python={min(r_produce, r_fetch):.1f}"
    )


if __name__ == "__main__":
    main()
