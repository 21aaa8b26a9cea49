"""Request header v0/v1/v2 and response header v0/v1, and which version goes with which API."""

from __future__ import annotations

import struct

import pytest

from kafka_wire.api import API_KEYS, request_class, response_class
from kafka_wire.exceptions import DecodeError
from kafka_wire.frames import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kafka_wire.headers import RequestHeader, ResponseHeader, request_header_version, response_header_version


def test_request_header_versions_round_trip() -> None:
    h0 = RequestHeader(api_key=7, api_version=0, correlation_id=42)
    assert h0.encode(0) == struct.pack(">hhi", 7, 0, 42)
    h1 = RequestHeader(api_key=3, api_version=4, correlation_id=-5, client_id="app")
    assert h1.encode(1) == struct.pack(">hhih", 3, 4, -5, 3) + b"app"
    assert RequestHeader.decode(h1.encode(1), 1) == h1
    # v2: the client id keeps its int16 length (field-level flexibleVersions "none"), then tags.
    h2 = RequestHeader(api_key=3, api_version=12, correlation_id=9, client_id="app",
                       unknown_tagged_fields=((3, b"\x01"), (7, b"")))
    data = h2.encode(2)
    assert data == struct.pack(">hhih", 3, 12, 9, 3) + b"app" + b"\x02\x03\x01\x01\x07\x00"
    assert RequestHeader.decode(data, 2) == h2
    null_client = RequestHeader(api_key=18, api_version=3, correlation_id=1, client_id=None)
    assert null_client.encode(2) == struct.pack(">hhih", 18, 3, 1, -1) + b"\x00"
    assert RequestHeader.decode(null_client.encode(2), 2).client_id is None


def test_response_header_versions_round_trip() -> None:
    assert ResponseHeader(correlation_id=7).encode(0) == struct.pack(">i", 7)
    assert ResponseHeader(correlation_id=7).encode(1) == struct.pack(">i", 7) + b"\x00"
    h = ResponseHeader(correlation_id=-1, unknown_tagged_fields=((0, b"ab"),))
    assert ResponseHeader.decode(h.encode(1), 1) == h


@pytest.mark.parametrize(("key", "version", "req", "resp"), [
    (0, 8, 1, 0), (0, 9, 2, 1), (0, 13, 2, 1),       # Produce: flexible from 9
    (1, 11, 1, 0), (1, 12, 2, 1),                     # Fetch: flexible from 12
    (18, 2, 1, 0), (18, 3, 2, 0), (18, 4, 2, 0),      # ApiVersions: response header always v0
    (18, 9, 2, 0),                                    # ...even for a version newer than we know
    (7, 0, 0, 0), (7, 1, 1, 0),                       # ControlledShutdown v0 (removed in 4.0): header v0
    (17, 1, 1, 0),                                    # SaslHandshake: never flexible
    (68, 0, 2, 1),                                    # ConsumerGroupHeartbeat: always flexible
])
def test_header_version_rules(key: int, version: int, req: int, resp: int) -> None:
    assert request_header_version(key, version) == req
    assert response_header_version(key, version) == resp


def test_header_version_of_unknown_api() -> None:
    with pytest.raises(ValueError, match="999"):
        request_header_version(999, 0)


def test_every_api_follows_the_flexible_rule() -> None:
    for key, spec in API_KEYS.items():
        for v in range(spec.min_version, spec.max_version + 1):
            flexible = spec.flexible_min is not None and v >= spec.flexible_min
            if key == 7 and v == 0:
                continue
            assert request_header_version(key, v) == (2 if flexible else 1)
            assert response_header_version(key, v) == (0 if key == 18 else 1 if flexible else 0)


def test_api_versions_response_frame_uses_header_v0() -> None:
    resp_cls = response_class(18)
    body = resp_cls(error_code=0, api_keys=[resp_cls.ApiVersion(api_key=0, min_version=3, max_version=13)])
    frame = encode_response(18, 3, 77, body)
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 77)
    assert frame[8:] == body.encode(3)  # no tagged-field byte after the correlation id
    corr, back = decode_response(18, 3, frame[4:])
    assert corr == 77 and back == body


def test_request_frame_round_trip_and_size_prefix() -> None:
    req_cls = request_class(18)
    body = req_cls(client_software_name="quire-test", client_software_version="1.0")
    header = RequestHeader(api_key=18, api_version=3, correlation_id=11, client_id="cli")
    frame = encode_request(header, body)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    h, b = decode_request(frame[4:])
    assert h == header and b == body
    # A flexible response carries response header v1.
    meta = response_class(3)(throttle_time_ms=5)
    frame = encode_response(3, 12, 8, meta)
    assert frame[4:9] == struct.pack(">i", 8) + b"\x00"
    assert decode_response(3, 12, frame[4:]) == (8, meta)


def test_unsupported_api_versions_request_header_is_still_readable() -> None:
    # A client newer than us sends ApiVersions v9: we cannot decode the body, but can answer.
    frame = struct.pack(">hhih", 18, 9, 1234, 3) + b"cli" + b"\x00" + b"\x05extra"
    with pytest.raises(DecodeError, match="unsupported version 9 of ApiVersions"):
        decode_request(frame)
    header, pos = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 9, 1234, "cli")
    assert pos == 14


def test_trailing_bytes_rejected() -> None:
    header = RequestHeader(api_key=12, api_version=0, correlation_id=1, client_id="x")
    body = request_class(12)(group_id="g", generation_id=1, member_id="m")
    frame = encode_request(header, body)[4:] + b"\x00"
    with pytest.raises(DecodeError, match="trailing"):
        decode_request(frame)
