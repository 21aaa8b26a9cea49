"""Bad input on the wire against a real standalone process: Kafka's error or a closed
connection, never a crash, and another connection keeps working throughout."""

from __future__ import annotations

import random
import socket
import struct

import pytest

from kafka_wire.api import API_KEYS
from kafka_wire.errors import ErrorCode
from kafka_wire.frames import decode_response
from kafka_wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka_wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.support.gateway import RawKafka, StandaloneGateway

pytestmark = pytest.mark.timeout(180)

# Every API this project serves, with the versions served: written out rather than read from
# the gateway's own table, so that an API that stops being served fails a test.
SERVED = {
    0: (3, 13),  # Produce
    1: (4, 18),  # Fetch
    2: (1, 11),  # ListOffsets
    3: (0, 13),  # Metadata
    8: (2, 10),  # OffsetCommit
    9: (1, 10),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (2, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 5),  # EndTxn
    27: (1, 2),  # WriteTxnMarkers
    28: (0, 6),  # TxnOffsetCommit
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    35: (1, 5),  # DescribeLogDirs
    37: (0, 3),  # CreatePartitions
    42: (0, 3),  # DeleteGroups (v3, Kafka 4.4: a per-group error message)
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 1),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    55: (0, 2),  # DescribeQuorum
    57: (0, 2),  # UpdateFeatures
    60: (0, 2),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 2),  # ListTransactions
    75: (0, 0),  # DescribeTopicPartitions
    68: (0, 1),  # ConsumerGroupHeartbeat
    69: (0, 1),  # ConsumerGroupDescribe
    76: (1, 1),  # ShareGroupHeartbeat
    77: (1, 1),  # ShareGroupDescribe
    78: (1, 2),  # ShareFetch
    79: (1, 2),  # ShareAcknowledge
    90: (0, 1),  # DescribeShareGroupOffsets
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
}


@pytest.fixture(scope="module")
def healthy(module_standalone: StandaloneGateway):  # type: ignore[no-untyped-def]
    conn = RawKafka(module_standalone.bootstrap)
    yield conn
    conn.close()


def _still_serving(gw: StandaloneGateway, conn: RawKafka) -> None:
    assert gw.alive, gw.output()[-3000:]
    resp = conn.request(3, 12, MetadataRequest(topics=None))
    assert isinstance(resp, MetadataResponse) and resp.brokers


def _header(api_key: int, version: int, corr: int = 1, client: bytes = b"abuse") -> bytes:
    return struct.pack(">hhih", api_key, version, corr, len(client)) + client


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


BAD_FRAMES = {
    "garbage": _framed(b"\x7f\xff\x13\x37garbage!garbage!"),
    "unknown api key": _framed(_header(9999, 0) + b"\x00" * 8),
    "unsupported version": _framed(_header(3, 99) + b"\x00" * 8),
    "negative version": _framed(_header(3, -1) + b"\x00" * 8),
    "truncated body": _framed(_header(3, 8) + b"\x00\x00"),
    "truncated header": _framed(b"\x00\x03\x00"),
    "client id longer than frame": _framed(struct.pack(">hhih", 3, 1, 1, 500) + b"x"),
    "empty frame": _framed(b""),
    "negative size": struct.pack(">i", -5) + b"\x00" * 20,
    "huge size": struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 20,
    "bad array length": _framed(_header(3, 1) + struct.pack(">i", 2**31 - 1)),
    "bad compact length": _framed(_header(3, 12)[:-5] + b"\x00\x05abuse\x00" + b"\xff\xff\xff\xff\x7f"),
}


def test_api_without_handler_closes_connection(
    module_standalone: StandaloneGateway, healthy: RawKafka
) -> None:
    unserved = [k for k in sorted(API_KEYS) if k not in SERVED]
    assert unserved
    for key in unserved[:5]:
        with RawKafka(module_standalone.bootstrap) as bad:
            bad.send_raw(_framed(_header(key, API_KEYS[key].min_version) + b"\x00" * 30))
            assert bad.closed_by_peer(), f"api {key}: connection not closed"
    _still_serving(module_standalone, healthy)


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_bad_frame_closes_connection(
    case: str, module_standalone: StandaloneGateway, healthy: RawKafka
) -> None:
    with RawKafka(module_standalone.bootstrap) as bad:
        bad.send_raw(BAD_FRAMES[case])
        assert bad.closed_by_peer(), f"{case}: connection not closed"
    _still_serving(module_standalone, healthy)


def test_half_frame_then_disconnect(module_standalone: StandaloneGateway, healthy: RawKafka) -> None:
    for cut in (1, 3, 10):
        with RawKafka(module_standalone.bootstrap) as bad:
            bad.send_raw(_framed(_header(3, 1) + b"\x00" * 8)[:cut])
    _still_serving(module_standalone, healthy)


def test_too_new_api_versions_gets_v0_unsupported(module_standalone: StandaloneGateway) -> None:
    with RawKafka(module_standalone.bootstrap) as c:
        # A flexible-version header (v2: tagged fields after the client id) and a body we don't know.
        c.send_raw(_framed(_header(18, 77, corr=42) + b"\x00" + b"\x05junk\x011.0\x00"))
        corr, resp = decode_response(18, 0, c.recv_frame())
        assert corr == 42 and isinstance(resp, ApiVersionsResponse)
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys == {18: SERVED[18]}  # only ApiVersions' range, as Kafka (KIP-511)
        # The connection stays usable for a supported version.
        ok = c.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert isinstance(ok, ApiVersionsResponse) and ok.error_code == 0


def test_api_versions_v5_is_not_served(module_standalone: StandaloneGateway) -> None:
    # Kafka 4.4's v5 (KIP-1242 cluster/node id checks) is capped: the client is told to use v4.
    with RawKafka(module_standalone.bootstrap) as c:
        c.send_raw(_framed(_header(18, 5, corr=7) + b"\x00" + ApiVersionsRequest(
            client_software_name="t", client_software_version="1", cluster_id="other", node_id=3).encode(5)))
        corr, resp = decode_response(18, 0, c.recv_frame())
    assert corr == 7 and isinstance(resp, ApiVersionsResponse)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]


def test_api_versions_advertises_exactly_the_served_apis(module_standalone: StandaloneGateway) -> None:
    with RawKafka(module_standalone.bootstrap) as c:
        resp = c.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert isinstance(resp, ApiVersionsResponse) and resp.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == SERVED
    for key, (lo, hi) in got.items():
        spec = API_KEYS[key]
        assert spec.min_version <= lo <= hi <= spec.max_stable_version
    assert {3, 18, 19, 20, 32, 33, 35, 37, 44, 60} <= set(got)
    assert got[3] == (0, 13)


def test_invalid_client_software_name(module_standalone: StandaloneGateway) -> None:
    with RawKafka(module_standalone.bootstrap) as c:
        resp = c.request(
            18, 3, ApiVersionsRequest(client_software_name="bad name!", client_software_version="1")
        )
    assert isinstance(resp, ApiVersionsResponse) and resp.error_code == ErrorCode.INVALID_REQUEST


def test_random_bodies_never_crash(module_standalone: StandaloneGateway, healthy: RawKafka) -> None:
    rng = random.Random(1234)
    keys = sorted(SERVED.items())
    for i in range(80):
        key, (lo, hi) = rng.choice(keys)
        version = rng.randint(lo, hi)
        spec = API_KEYS[key]
        head = _header(key, version, corr=i) + (b"\x00" if spec.is_flexible(version) else b"")
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        with RawKafka(module_standalone.bootstrap, timeout=5) as c:
            c.send_raw(_framed(head + body))
            c.sock.settimeout(5)
            try:
                head4 = c.sock.recv(4)
            except (ConnectionResetError, TimeoutError):
                head4 = b""
            if head4:  # answered: a well-formed frame with our correlation id
                size = struct.unpack(">i", head4.ljust(4, b"\x00"))[0]
                assert 4 <= size < 1 << 20
                assert struct.unpack(">i", c.sock.recv(4, socket.MSG_WAITALL))[0] == i
        if i % 20 == 0:
            _still_serving(module_standalone, healthy)
    _still_serving(module_standalone, healthy)
