"""A small blocking Kafka-protocol connection for `quire migrate`'s tasks: raw record batches
fetched from a Kafka broker as stored (no per-record decoding, codecs untouched) and handed to
a Quire partition owner through the internal import (gateway/imports.py). Requests and
responses are the generated codecs of kafka_wire; Kafka clients (confluent-kafka) do the
rest of the job (admin, group offsets, verification), so this knows only what they cannot do."""

from __future__ import annotations

import collections
import socket
import struct
from dataclasses import dataclass
from typing import Any

from gateway.imports import IMPORT_MIN_PRODUCE_VERSION, import_tags
from kafka_wire.errors import ErrorCode
from kafka_wire.frames import decode_response, encode_request
from kafka_wire.headers import RequestHeader
from kafka_wire.messages.fetch import FetchRequest
from kafka_wire.messages.list_offsets import ListOffsetsRequest
from kafka_wire.messages.metadata import MetadataRequest
from kafka_wire.messages.produce import ProduceRequest
from kafka_wire.primitives import TaggedFields

FETCH, LIST_OFFSETS, METADATA, PRODUCE = 1, 2, 3, 0
FETCH_V, LIST_OFFSETS_V, METADATA_V = 12, 7, 12  # topic names, flexible; served by Kafka 4.x and Quire
READ_COMMITTED = 1
LATEST, EARLIEST = -1, -2
TIMEOUT_S = 60.0
IMPORT_TIMEOUT_MS = 60_000
_SIZE = struct.Struct(">i")


class KafkaError(RuntimeError):
    """A Kafka error code in a response, with its name."""

    def __init__(self, code: int, what: str, message: str | None = None) -> None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        super().__init__(f"{what}: {name}" + (f" ({message})" if message else ""))
        self.code = code


@dataclass
class FetchedPartition:
    records: bytes  # whole and partial batches, as the broker sent them
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset) of aborted transactions


class Connection:
    def __init__(self, address: str, client_id: str = "quire-migrate", timeout: float = TIMEOUT_S) -> None:
        host, port = address.rsplit(":", 1)
        self.address = address
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._corr = 0
        self._sent: collections.deque[tuple[int, int, int]] = collections.deque()  # (corr, api key, version)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, body: Any, tags: TaggedFields = ()) -> Any:
        if self._sent:
            raise RuntimeError(f"{self.address}: {len(self._sent)} pipelined requests unanswered")
        self.send(api_key, version, body, tags)
        return self.receive()

    def send(self, api_key: int, version: int, body: Any, tags: TaggedFields = ()) -> None:
        """Send a request without waiting for its answer (Kafka's pipelining: the server
        applies a connection's requests in order and answers them in order); `receive` the
        answers in the order sent."""
        self._corr += 1
        header = RequestHeader(api_key=api_key, api_version=version, correlation_id=self._corr,
                               client_id=self.client_id, unknown_tagged_fields=tags)
        self.sock.sendall(encode_request(header, body))
        self._sent.append((self._corr, api_key, version))

    def receive(self) -> Any:
        """The answer to the oldest request sent and not yet received."""
        want, api_key, version = self._sent.popleft()
        size = _SIZE.unpack(self._recv(4))[0]
        corr, resp = decode_response(api_key, version, self._recv(size))
        if corr != want:
            raise ConnectionError(f"{self.address}: correlation id {corr}, expected {want}")
        return resp

    @property
    def unanswered(self) -> int:
        return len(self._sent)

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError(f"{self.address} closed the connection")
            got += k
        return bytes(buf)

    # ---- requests ------------------------------------------------------------------------

    def leaders(self, topics: list[str]) -> dict[tuple[str, int], str]:
        """(topic, partition) -> "host:port" of its leader."""
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=False)
        resp = self.request(METADATA, METADATA_V, req)
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in resp.brokers}
        out: dict[tuple[str, int], str] = {}
        for t in resp.topics:
            if t.error_code:
                raise KafkaError(t.error_code, f"metadata of topic {t.name}")
            for p in t.partitions:
                if p.leader_id in brokers:
                    out[(t.name, p.partition_index)] = brokers[p.leader_id]
        return out

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchedPartition:
        """One read_committed fetch of a partition from `offset` (aborted transactions listed)."""
        part = FetchRequest.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes,
                                           current_leader_epoch=-1, last_fetched_epoch=-1, log_start_offset=-1)
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                           isolation_level=READ_COMMITTED, session_id=0, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])])
        resp = self.request(FETCH, FETCH_V, req)
        if resp.error_code:
            raise KafkaError(resp.error_code, f"fetch of {topic}-{partition}")
        p = resp.responses[0].partitions[0]
        if p.error_code:
            raise KafkaError(p.error_code, f"fetch of {topic}-{partition} at {offset} from {self.address}")
        return FetchedPartition(bytes(p.records or b""), p.high_watermark, p.last_stable_offset, p.log_start_offset,
                                [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()])

    def list_offset(self, topic: str, partition: int, timestamp: int, *, committed: bool = True) -> int:
        """ListOffsets of one partition: LATEST (the last stable offset when `committed`) or
        EARLIEST."""
        req = ListOffsetsRequest(replica_id=-1, isolation_level=READ_COMMITTED if committed else 0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                        timestamp=timestamp)])])
        p = self.request(LIST_OFFSETS, LIST_OFFSETS_V, req).topics[0].partitions[0]
        if p.error_code:
            raise KafkaError(p.error_code, f"list offsets of {topic}-{partition}")
        return int(p.offset)

    def import_batches(self, topic: str, partition: int, records: bytes | bytearray | memoryview,
                       timeout_ms: int = IMPORT_TIMEOUT_MS, *, expected_end: int | None = None) -> int:
        """Append batches at their own offsets on the partition's Quire owner; returns the last
        batch's base offset once the ack quorum has it."""
        self.send_import(topic, partition, records, timeout_ms, expected_end=expected_end)
        return self.receive_import(topic, partition)

    def send_import(self, topic: str, partition: int, records: bytes | bytearray | memoryview,
                    timeout_ms: int = IMPORT_TIMEOUT_MS, *, expected_end: int | None = None) -> None:
        """Send an import without waiting (`receive_import` its answer): with `expected_end`,
        it applies only where the partition's log then ends there (gateway/imports.py)."""
        req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=records)])])
        self.send(PRODUCE, IMPORT_MIN_PRODUCE_VERSION, req, import_tags(expected_end))

    def receive_import(self, topic: str, partition: int) -> int:
        p = self.receive().responses[0].partition_responses[0]
        if p.error_code:
            raise KafkaError(p.error_code, f"import into {topic}-{partition}", p.error_message)
        return int(p.base_offset)
