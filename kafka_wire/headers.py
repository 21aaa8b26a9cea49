"""Request and response headers, and which header version goes with which API version."""

from __future__ import annotations

from kafka_wire.api import API_KEYS
from kafka_wire.messages.request_header import RequestHeader
from kafka_wire.messages.response_header import ResponseHeader

__all__ = ["RequestHeader", "ResponseHeader", "request_header_version", "response_header_version"]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


def _flexible(api_key: int, api_version: int) -> bool:
    spec = API_KEYS.get(api_key)
    if spec is None:
        raise ValueError(f"unknown api key {api_key}")
    # Versions above our max count as flexible when the API is: a client may send an ApiVersions
    # request newer than we know, and we must still read its header to answer it.
    return spec.is_flexible(api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if _flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0  # so a client can read it before versions are negotiated
    return 1 if _flexible(api_key, api_version) else 0
