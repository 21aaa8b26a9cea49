"""Share groups' dead-letter topics on a partition owner (the logic: coordinator/share/dead_letters.py):
the source records read from the partition log, and the append to the group's dead-letter topic,
created on demand, through the partition layer: on this gateway when it owns the dead-letter
partition, else as an acks=all Produce to the gateway that owns it (the same routing a client
follows from Metadata)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.share.dead_letters import SourceRecord
from gateway.errors import KafkaApiError
from gateway.partition.lookup import TopicCache
from kafka_wire.errors import ErrorCode
from kafka_wire.frames import decode_response, encode_request
from kafka_wire.messages.produce import ProduceRequest, ProduceResponse
from kafka_wire.messages.request_header import RequestHeader
from kafka_wire.records.batch import InvalidBatch, TimestampType, iter_batches
from store.tasks import within

if TYPE_CHECKING:
    from gateway.cluster.membership import ClusterView
    from gateway.cluster.partitions import PartitionManager
    from gateway.partition.log import PartitionLog
    from gateway.topics.registry import TopicInfo, TopicRegistry

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20  # per log read while collecting a run's records
PRODUCE_VERSION = 9
PRODUCE_TIMEOUT_S = 30.0
_corr = itertools.count(1)


async def read_records(plog: PartitionLog, first: int, last: int) -> list[SourceRecord]:
    """The data records stored at first..last (decoded: a cold path, at most one drain step's
    worth, see MAX_RECORDS_PER_APPEND); those before the log start are gone."""
    out: list[SourceRecord] = []
    offset = max(first, plog.log_start_offset)
    while offset <= last and offset < plog.high_watermark:
        moved = False
        for buf in await plog.read(offset, READ_BYTES):
            try:
                batches = list(iter_batches(buf))
            except InvalidBatch:
                break  # the cut-off tail of the read: the next read starts with it
            for b in batches:
                if b.last_offset < offset:
                    continue
                if not b.is_control:
                    append_time = b.timestamp_type == TimestampType.LOG_APPEND_TIME
                    for r in b.records():
                        o = b.base_offset + r.offset_delta
                        if first <= o <= last:
                            ts = b.max_timestamp if append_time else b.base_timestamp + r.timestamp_delta
                            out.append(SourceRecord(o, ts, r.key, r.value, r.headers))
                offset, moved = b.last_offset + 1, True
        if not moved:
            break
    return out


@dataclass(frozen=True)
class DeadLetterSink:
    """What appending dead letters uses of a gateway: its topics and partitions, and the cluster
    view to forward to another owner."""

    topics: TopicRegistry
    partitions: PartitionManager
    cluster: ClusterView
    node_id: int
    num_partitions: int  # of a dead-letter topic created on demand


async def dead_letter_topic(sink: DeadLetterSink, name: str) -> TopicInfo:
    """The topic, created (num.partitions, default configs) if it does not exist."""
    info = await sink.topics.get(name)
    if info is not None:
        return info
    try:
        return await sink.topics.create(name, sink.num_partitions, {})
    except KafkaApiError as e:
        if e.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
    found = await sink.topics.get(name)
    if found is None:
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"dead-letter topic {name} vanished")
    return found


async def append_dead_letters(sink: DeadLetterSink, name: str, source_partition: int, batch: bytes) -> None:
    """Append `batch` to the dead-letter topic `name` (partition: the source partition's number
    modulo its partitions); returns once it is durable, raises otherwise."""
    info = await dead_letter_topic(sink, name)
    p = source_partition % info.partitions
    leader = sink.cluster.leader_of(info.topic_id, p)
    if leader is None or leader == sink.node_id:
        _, plog = await TopicCache(sink.topics, sink.partitions).log(info.name, p)
        await plog.append(
            bytearray(batch), api_version=PRODUCE_VERSION,
            max_message_bytes=info.config_int("max.message.bytes"),
            log_append_time=info.config("message.timestamp.type") == "LogAppendTime",
        )
        return
    node = sink.cluster.node(leader)
    if node is None:
        raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{name}-{p}: owner {leader} unknown")
    await within(_produce_to(node.host, node.port, info.name, p, batch), PRODUCE_TIMEOUT_S)


async def _produce_to(host: str, port: int, topic: str, partition: int, batch: bytes) -> None:
    req = ProduceRequest(acks=-1, timeout_ms=int(PRODUCE_TIMEOUT_S * 1000), topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
    hdr = RequestHeader(api_key=ProduceRequest.API_KEY, api_version=PRODUCE_VERSION,
                        correlation_id=next(_corr) & 0x7FFFFFFF, client_id="quire-dlq")
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(encode_request(hdr, req))
        await writer.drain()
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        _, resp = decode_response(ProduceRequest.API_KEY, PRODUCE_VERSION, await reader.readexactly(size))
    finally:
        writer.close()
    assert isinstance(resp, ProduceResponse)
    code = resp.responses[0].partition_responses[0].error_code
    if code != ErrorCode.NONE:
        raise KafkaApiError(code, f"dead-letter append to {topic}-{partition} on {host}:{port}")
