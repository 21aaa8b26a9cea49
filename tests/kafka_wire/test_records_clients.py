"""Record batches written by real Kafka clients (confluent-kafka/librdkafka, kafka-python,
aiokafka) decode and validate: a tiny fake broker in the test answers ApiVersions, Metadata,
InitProducerId and Produce, and keeps the Produce requests it saw."""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from kafka_wire.errors import ErrorCode
from kafka_wire.hotpath import decode_produce_request
from kafka_wire.records import Compression, InvalidBatch, RecordBatch, validate_produce_records

TOPIC = "quire-capture"
NODE = 1
API_VERSIONS, METADATA, PRODUCE, FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID = 18, 3, 0, 1, 10, 22
# Fetch is advertised though never answered: librdkafka only writes magic v2 (and zstd) when the
# broker also offers Fetch v4+ (v10+), else it falls back to magic v0 message sets; it only uses
# lz4 when FindCoordinator is offered.
SUPPORTED = {
    PRODUCE: (0, 12),
    FETCH: (4, 12),
    METADATA: (0, 8),
    FIND_COORDINATOR: (0, 3),
    API_VERSIONS: (0, 3),
    INIT_PRODUCER_ID: (0, 1),
}
FLEXIBLE_FROM = {PRODUCE: 9, METADATA: 9, API_VERSIONS: 3, INIT_PRODUCER_ID: 2}


def _i16(v: int) -> bytes:
    return struct.pack(">h", v)


def _i32(v: int) -> bytes:
    return struct.pack(">i", v)


def _i64(v: int) -> bytes:
    return struct.pack(">q", v)


def _str(s: str | None) -> bytes:
    if s is None:
        return _i16(-1)
    raw = s.encode()
    return _i16(len(raw)) + raw


def _uv(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return _uv(len(raw) + 1) + raw


def _read_uv(b: bytes, p: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        x = b[p]
        p += 1
        n |= (x & 0x7F) << shift
        if x < 0x80:
            return n, p
        shift += 7


@dataclass
class Captured:
    version: int
    body: bytes


@dataclass
class FakeBroker:
    port: int = 0
    produced: list[Captured] = field(default_factory=list)
    other_apis: list[int] = field(default_factory=list)
    next_offset: int = 0
    advertise_fetch: bool = True
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    writers: set[asyncio.StreamWriter] = field(default_factory=set)

    def api_versions(self, v: int) -> bytes:
        keys = sorted((k, r) for k, r in SUPPORTED.items() if self.advertise_fetch or k != FETCH)
        if v >= 3:
            body = _i16(0) + _uv(len(keys) + 1)
            body += b"".join(_i16(k) + _i16(lo) + _i16(hi) + b"\x00" for k, (lo, hi) in keys)
            return body + _i32(0) + b"\x00"
        body = _i16(0) + _i32(len(keys)) + b"".join(_i16(k) + _i16(lo) + _i16(hi) for k, (lo, hi) in keys)
        return body + (_i32(0) if v >= 1 else b"")

    def metadata(self, v: int) -> bytes:
        out = bytearray(_i32(0) if v >= 3 else b"")
        out += _i32(1) + _i32(NODE) + _str("127.0.0.1") + _i32(self.port)
        if v >= 1:
            out += _str(None)
        if v >= 2:
            out += _str("quire-test")
        if v >= 1:
            out += _i32(NODE)
        out += _i32(1) + _i16(0) + _str(TOPIC)
        if v >= 1:
            out += b"\x00"
        out += _i32(1) + _i16(0) + _i32(0) + _i32(NODE)
        if v >= 7:
            out += _i32(0)
        out += _i32(1) + _i32(NODE) + _i32(1) + _i32(NODE)
        if v >= 5:
            out += _i32(0)
        if v >= 8:
            out += _i32(-(2**31)) + _i32(-(2**31))
        return bytes(out)

    def produce(self, v: int, body: bytes) -> bytes | None:
        self.produced.append(Captured(v, body))
        req = decode_produce_request(body, v)
        if req.acks == 0:
            return None
        flex = v >= 9
        topics: dict[str, list[tuple[int, int]]] = {}
        for p in req.partitions:
            assert isinstance(p.topic, str)
            count = 0
            if p.records is not None and len(p.records) >= 61 and p.records[16] == 2:
                count = RecordBatch(p.records).record_count
            topics.setdefault(p.topic, []).append((p.partition, self.next_offset))
            self.next_offset += count
        out = bytearray(_uv(len(topics) + 1) if flex else _i32(len(topics)))
        for name, parts in topics.items():
            out += _cstr(name) if flex else _str(name)
            out += _uv(len(parts) + 1) if flex else _i32(len(parts))
            for index, base in parts:
                out += _i32(index) + _i16(0) + _i64(base) + _i64(-1)
                if v >= 5:
                    out += _i64(0)
                if v >= 8:
                    out += (b"\x01" + b"\x00") if flex else (_i32(0) + _str(None))
                if flex:
                    out += b"\x00"
            if flex:
                out += b"\x00"
        out += _i32(0)
        if flex:
            out += b"\x00"
        return bytes(out)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.writers.add(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                api, v, corr = struct.unpack_from(">hhi", frame)
                n = struct.unpack_from(">h", frame, 8)[0]
                p = 10 + max(n, 0)
                flex = api in FLEXIBLE_FROM and v >= FLEXIBLE_FROM[api]
                if flex:
                    tags, p = _read_uv(frame, p)
                    for _ in range(tags):
                        _, p = _read_uv(frame, p)
                        ln, p = _read_uv(frame, p)
                        p += ln
                body = frame[p:]
                if api == API_VERSIONS:
                    resp: bytes | None = self.api_versions(v)
                    flex = False  # ApiVersions responses always use header v0
                elif api == METADATA:
                    resp = self.metadata(v)
                elif api == INIT_PRODUCER_ID:
                    resp = _i32(0) + _i16(0) + _i64(4242) + _i16(3)
                elif api == PRODUCE:
                    resp = self.produce(v, body)
                else:
                    self.other_apis.append(api)
                    break
                if resp is not None:
                    head = _i32(corr) + (b"\x00" if flex else b"")
                    writer.write(_i32(len(head) + len(resp)) + head + resp)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.tasks.discard(task)
            self.writers.discard(writer)

    async def shutdown(self, server: asyncio.Server) -> None:
        server.close()
        for w in list(self.writers):
            w.close()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    fb = FakeBroker()
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(fb.handle, "127.0.0.1", 0))
    fb.port = server.sockets[0].getsockname()[1]
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    yield fb
    asyncio.run_coroutine_threadsafe(fb.shutdown(server), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    t.join(10)
    loop.close()


MESSAGES = [
    (b"key-%d" % i, b"value-%d " % i * (i + 1), [("h1", b"x%d" % i), ("h2", b"" if i % 2 else b"y")])
    for i in range(20)
]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _check_captured(broker: FakeBroker, codec: str, idempotent: bool) -> set[bool]:
    """Returns, for snappy, which framings were seen (True: xerial)."""
    assert broker.produced, f"no Produce request captured (other apis: {broker.other_apis})"
    got = []
    xerial: set[bool] = set()
    for cap in broker.produced:
        req = decode_produce_request(cap.body, cap.version)
        for part in req.partitions:
            assert part.topic == TOPIC
            batch = validate_produce_records(part.records, cap.version)
            assert batch.compression == Compression[codec.upper()]
            assert batch.memoryview().tobytes() == bytes(part.records)
            xerial.add(bytes(batch.memoryview()[61:69]) == b"\x82SNAPPY\x00")
            if idempotent:
                assert batch.producer_id == 4242
                assert batch.producer_epoch == 3
                assert batch.base_sequence >= 0
            for rec in batch.records():
                headers = [(k, v) for k, v in rec.headers]
                got.append((rec.key, rec.value, headers))
    # clients may write an empty header value as null or b""; normalise to compare
    norm = [(k, v, [(hk, hv or b"") for hk, hv in hs]) for k, v, hs in MESSAGES]
    assert [(k, v, [(hk, hv or b"") for hk, hv in hs]) for k, v, hs in got] == norm
    return xerial


@pytest.mark.parametrize("idempotent", [False, True])
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka(broker: FakeBroker, codec: str, idempotent: bool) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "compression.codec": codec,
            "enable.idempotence": idempotent,
            "linger.ms": 50,
            "broker.address.family": "v4",
        }
    )
    for k, v, h in MESSAGES:
        p.produce(TOPIC, key=k, value=v, headers=h, partition=0)
    assert p.flush(30) == 0
    xerial = _check_captured(broker, codec, idempotent)
    if codec == "snappy":
        assert xerial == {False}  # librdkafka writes raw snappy


def test_confluent_kafka_magic_v0_refused(broker: FakeBroker) -> None:
    """librdkafka falls back to magic v0 message sets when the broker offers no Fetch v4; such
    input inside a Produce v3+ request is refused with INVALID_RECORD, as Kafka 4 does."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker.advertise_fetch = False
    p = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 10})
    p.produce(TOPIC, key=b"k", value=b"v", partition=0)
    assert p.flush(30) == 0
    cap = broker.produced[0]
    part = decode_produce_request(cap.body, cap.version).partitions[0]
    assert part.records is not None and part.records[16] == 0
    with pytest.raises(InvalidBatch) as exc:
        validate_produce_records(part.records, cap.version)
    assert exc.value.error_code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("idempotent", [False, True])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(broker: FakeBroker, codec: str, idempotent: bool) -> None:
    kafka = pytest.importorskip("kafka")
    p = kafka.KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{broker.port}",
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotent,
        acks="all" if idempotent else 1,
        linger_ms=50,
    )
    try:
        futures = [p.send(TOPIC, key=k, value=v, headers=h, partition=0) for k, v, h in MESSAGES]
        for f in futures:
            f.get(timeout=30)
    finally:
        p.close(timeout=5)
    xerial = _check_captured(broker, codec, idempotent)
    if codec == "snappy":
        assert xerial == {True}  # kafka-python writes Java's xerial framing


@pytest.mark.parametrize("idempotent", [False, True])
@pytest.mark.parametrize("codec", CODECS)
async def test_aiokafka(broker: FakeBroker, codec: str, idempotent: bool) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    p = aiokafka.AIOKafkaProducer(
        bootstrap_servers=f"127.0.0.1:{broker.port}",
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotent,
        linger_ms=50,
    )
    await p.start()
    try:
        futures = [await p.send(TOPIC, key=k, value=v, headers=h, partition=0) for k, v, h in MESSAGES]
        await asyncio.gather(*futures)
    finally:
        await p.stop()
    _check_captured(broker, codec, idempotent)
