"""From a request frame to a response: version checks, decoding, handler call, error mapping.

Kafka's rules: an unknown API key, an unsupported version (except ApiVersions) or a body that
does not decode closes the connection; a too-new ApiVersions is answered at v0 with
UNSUPPORTED_VERSION and our ranges; a handler's KafkaApiError goes in the response's top-level
error field when the API has one, otherwise the connection closes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from gateway.errors import KafkaApiError
from gateway.handlers.spec import Buffer, HandlerSpec, RawResponse
from kafka_wire.api import API_KEYS, request_class, response_class
from kafka_wire.errors import ErrorCode
from kafka_wire.headers import response_header_version
from kafka_wire.messages.response_header import ResponseHeader
from kafka_wire.primitives import EncodeError, Struct

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18


class CloseConnection(Exception):
    """The request cannot be answered: close the connection (as Kafka does)."""


def version_range(spec: HandlerSpec) -> tuple[int, int] | None:
    """The versions we serve for a handler: the schema's stable range clipped by the spec."""
    api = API_KEYS.get(spec.api_key)
    if api is None:
        return None
    lo = max(api.min_version, spec.min_version if spec.min_version is not None else api.min_version)
    hi = min(api.max_stable_version, spec.max_version if spec.max_version is not None else api.max_stable_version)
    return (lo, hi) if lo <= hi else None


def supported_apis(handlers: Mapping[int, HandlerSpec]) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) for every handler of the table, as ApiVersions advertises."""
    out: dict[int, tuple[int, int]] = {}
    for key, spec in sorted(handlers.items()):
        r = version_range(spec)
        if r is not None:
            out[key] = r
    return out


@cache
def _field_versions(api_key: int, attr: str) -> tuple[int, int] | None:
    for f in response_class(api_key)._FIELDS:
        if f.attr == attr:
            return f.versions
    return None


def _has_field(api_key: int, version: int, attr: str) -> bool:
    v = _field_versions(api_key, attr)
    return v is not None and v[0] <= version <= v[1]


def error_body(api_key: int, version: int, code: int, message: str) -> Struct:
    """A default response carrying `code` in its top-level error field; CloseConnection if none."""
    if not _has_field(api_key, version, "error_code"):
        raise CloseConnection(f"api {api_key} v{version} has no top-level error field (error {code}: {message})")
    body = response_class(api_key)()
    body.error_code = code  # type: ignore[attr-defined]
    if message and _has_field(api_key, version, "error_message"):
        body.error_message = message  # type: ignore[attr-defined]
    return body


@dataclass
class Reply:
    """An encoded response frame (size prefix included), as buffers for writelines."""

    buffers: Sequence[Buffer]


def fit_to_version(obj: Struct, version: int) -> None:
    """Reset fields that do not exist in `version` to their defaults and nulls that the version
    cannot carry to "", recursively, so one response object serves every version."""
    fresh: Struct | None = None
    for f in obj._FIELDS:
        lo, hi = f.versions
        value = getattr(obj, f.attr)
        if not lo <= version <= hi:
            if fresh is None:
                fresh = type(obj)()
            setattr(obj, f.attr, getattr(fresh, f.attr))
        elif value is None and f.type in ("string", "bytes") and (
                f.nullable is None or not f.nullable[0] <= version <= f.nullable[1]):
            setattr(obj, f.attr, "" if f.type == "string" else b"")
        elif f.struct is not None and value is not None:
            for item in value if isinstance(value, list) else [value]:
                fit_to_version(item, version)


def encode_reply(api_key: int, version: int, correlation_id: int, body: Struct | RawResponse) -> Reply:
    out = bytearray(4)
    ResponseHeader(correlation_id=correlation_id).encode_into(out, response_header_version(api_key, version))
    if isinstance(body, RawResponse):
        size = len(out) - 4 + sum(memoryview(b).nbytes for b in body.buffers)
        out[0:4] = size.to_bytes(4, "big", signed=True)
        return Reply([out, *body.buffers])
    head = len(out)
    try:
        body.encode_into(out, version)
    except EncodeError:
        # A field set that this version lacks: drop it, as Kafka's ignorable fields are.
        del out[head:]
        fit_to_version(body, version)
        body.encode_into(out, version)
    out[0:4] = (len(out) - 4).to_bytes(4, "big", signed=True)
    return Reply([out])


def decode_body(spec: HandlerSpec, version: int, frame: bytearray | memoryview, pos: int) -> object:
    """The handler's argument: the decoded message, or the raw body as a writable memoryview."""
    mv = memoryview(frame)
    if spec.raw_request:
        return mv[pos:]
    # Trailing bytes are ignored, as Kafka does: librdkafka's Metadata v10+ "all topics" request
    # carries 3 stray bytes after its tagged fields.
    body, _end = request_class(spec.api_key).decode_from(mv, pos, version)
    return body


def unexpected_error(api_key: int, e: BaseException) -> KafkaApiError:
    log.exception("handler for api %d failed", api_key, exc_info=e)
    return KafkaApiError(int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(e).__name__}: {e}")
