"""Whole request/response frames: header + body, with the int32 size prefix on encode."""

from __future__ import annotations

import struct

from kafka_wire.api import API_KEYS, request_class, response_class
from kafka_wire.exceptions import DecodeError
from kafka_wire.headers import RequestHeader, ResponseHeader, request_header_version, response_header_version
from kafka_wire.primitives import Buf, Struct

_HH = struct.Struct(">hh")
_I32 = struct.Struct(">i")


def decode_request_header(frame: Buf) -> tuple[RequestHeader, int]:
    """The header of a request frame (bytes after the size prefix) and where its body starts.
    Works for any version of a known API, so a server can answer versions it cannot decode."""
    b = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(b) < 4:
        raise DecodeError("truncated request header", "RequestHeader", len(b))
    api_key, api_version = _HH.unpack_from(b, 0)
    if api_key not in API_KEYS:
        raise DecodeError(f"unknown api key {api_key}", "RequestHeader.api_key", 0)
    if api_version < 0:
        raise DecodeError(f"negative api version {api_version} for api key {api_key}",
                          "RequestHeader.api_version", 2)
    return RequestHeader.decode_from(b, 0, request_header_version(api_key, api_version))


def decode_request(frame: Buf) -> tuple[RequestHeader, Struct]:
    """Header and body of a request frame. Unknown api key or version -> DecodeError naming them."""
    b = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(b) >= 4:
        api_key, api_version = _HH.unpack_from(b, 0)
        spec = API_KEYS.get(api_key)
        if spec is not None and not spec.supports(api_version):
            raise DecodeError(
                f"unsupported version {api_version} of {spec.name} (api key {api_key}; "
                f"supported {spec.min_version}-{spec.max_version})", "RequestHeader.api_version", 2)
    header, pos = decode_request_header(b)
    spec = API_KEYS[header.api_key]
    body, end = request_class(header.api_key).decode_from(b, pos, header.api_version)
    if end != len(b):
        raise DecodeError(f"{len(b) - end} unexpected trailing bytes", f"{spec.name}Request", end)
    return header, body


def _sized(out: bytearray) -> bytes:
    out[0:4] = _I32.pack(len(out) - 4)
    return bytes(out)


def encode_request(header: RequestHeader, body: Struct) -> bytes:
    """Size prefix + header + body, in header.api_version."""
    out = bytearray(4)
    header.encode_into(out, request_header_version(header.api_key, header.api_version))
    body.encode_into(out, header.api_version)
    return _sized(out)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Struct) -> bytes:
    """Size prefix + response header + body."""
    out = bytearray(4)
    ResponseHeader(correlation_id=correlation_id).encode_into(out, response_header_version(api_key, api_version))
    body.encode_into(out, api_version)
    return _sized(out)


def decode_response(api_key: int, api_version: int, frame: Buf) -> tuple[int, Struct]:
    """Correlation id and body of a response frame (bytes after the size prefix)."""
    b = frame if isinstance(frame, memoryview) else memoryview(frame)
    spec = API_KEYS.get(api_key)
    if spec is None:
        raise DecodeError(f"unknown api key {api_key}", "ResponseHeader", 0)
    if not spec.supports(api_version):
        raise DecodeError(f"unsupported version {api_version} of {spec.name} (api key {api_key})",
                          "ResponseHeader", 0)
    header, pos = ResponseHeader.decode_from(b, 0, response_header_version(api_key, api_version))
    body, end = response_class(api_key).decode_from(b, pos, api_version)
    if end != len(b):
        raise DecodeError(f"{len(b) - end} unexpected trailing bytes", f"{spec.name}Response", end)
    return header.correlation_id, body
