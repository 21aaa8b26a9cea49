"""The API table (keys, names, version ranges) and lazy access to each API's generated classes."""

from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass
from functools import cache

from kafka_wire.exceptions import DecodeError
from kafka_wire.messages import APIS, OTHERS
from kafka_wire.primitives import Buf, Struct


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    name: str  # "Produce"
    min_version: int
    max_version: int
    flexible_min: int | None  # first flexible version, None if no version is flexible
    latest_unstable: bool  # Kafka does not advertise max_version unless unstable versions are enabled
    module: str  # kafka_wire.messages.<module>
    request_name: str
    response_name: str

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def max_stable_version(self) -> int:
        return self.max_version - 1 if self.latest_unstable else self.max_version


API_KEYS: dict[int, ApiSpec] = {
    key: ApiSpec(key, name, lo, hi, flex, unstable, module, req, resp)
    for key, name, module, req, resp, lo, hi, flex, unstable in APIS
}
API_NAMES: dict[str, ApiSpec] = {spec.name: spec for spec in API_KEYS.values()}


@cache
def _module_attr(module: str, name: str) -> type[Struct]:
    cls = getattr(importlib.import_module(f"kafka_wire.messages.{module}"), name)
    assert issubclass(cls, Struct)
    return cls


def _spec(api_key: int) -> ApiSpec:
    spec = API_KEYS.get(api_key)
    if spec is None:
        raise KeyError(f"unknown api key {api_key}")
    return spec


def request_class(api_key: int) -> type[Struct]:
    spec = _spec(api_key)
    return _module_attr(spec.module, spec.request_name)


def response_class(api_key: int) -> type[Struct]:
    spec = _spec(api_key)
    return _module_attr(spec.module, spec.response_name)


def schema_class(name: str) -> type[Struct]:
    """A header or data schema's class by name, e.g. "ConsumerProtocolAssignment"."""
    module, _kind = OTHERS[name]
    return _module_attr(module, name)


def decode_versioned(cls: type[Struct], buf: Buf) -> tuple[int, Struct]:
    """A data blob that starts with its own int16 version (ConsumerProtocolSubscription/Assignment).
    As Kafka does, a version newer than we know is read as our newest, and the fields it appended
    after ours are ignored."""
    b = buf if isinstance(buf, memoryview) else memoryview(buf)
    if len(b) < 2:
        raise DecodeError("truncated version prefix", cls.__qualname__, 0)
    (version,) = struct.unpack_from(">h", b, 0)
    lo, hi = cls.MIN_VERSION, cls.MAX_VERSION  # type: ignore[attr-defined]
    if version < lo:
        raise DecodeError(f"unsupported version {version}", cls.__qualname__, 0)
    if version > hi:
        obj, _end = cls.decode_from(b, 2, hi)
        return version, obj
    return version, cls.decode(b[2:], version)


def encode_versioned(obj: Struct, version: int) -> bytes:
    """int16 version + the encoding of obj in that version."""
    return struct.pack(">h", version) + obj.encode(version)
