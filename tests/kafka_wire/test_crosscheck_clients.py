"""Cross-check against the hand-written per-version codecs of kafka-python 3.0.12
(`kafka.protocol.old`) and aiokafka (`aiokafka.protocol`): for every (api, version) they implement,
our bytes equal theirs for the same values and each side decodes the other's bytes.

Their classes are discovered programmatically (API_KEY / API_VERSION / SCHEMA); values are mapped
positionally, field by field in wire order, so no name mapping is needed.
"""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
from types import ModuleType
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given

from kafka_wire.api import API_KEYS, request_class, response_class
from kafka_wire.primitives import FieldInfo, Struct
from tests.kafka_wire.test_messages_roundtrip import PROFILE, is_flexible, struct_strategy

ZERO = UUID(int=0)


class Mismatch(Exception):
    """Their schema does not line up with ours (other field count or a type we do not map)."""


def _discover(package: str) -> list[tuple[str, int, int, str, Any]]:
    """(library, api_key, version, 'request'|'response', SCHEMA) for each per-version class."""
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return []
    mods: list[ModuleType] = [pkg]
    for info in pkgutil.iter_modules(pkg.__path__):
        try:
            mods.append(importlib.import_module(f"{package}.{info.name}"))
        except Exception:  # a module needing optional deps
            continue
    found: dict[tuple[int, int, str], Any] = {}
    for mod in mods:
        for name, obj in vars(mod).items():
            if not inspect.isclass(obj) or obj.__module__ != mod.__name__:
                continue
            key, ver, schema = (getattr(obj, a, None) for a in ("API_KEY", "API_VERSION", "SCHEMA"))
            if not isinstance(key, int) or not isinstance(ver, int) or schema is None:
                continue
            kind = "request" if "Request" in name else "response" if "Response" in name else None
            if kind is not None:
                found.setdefault((key, ver, kind), schema)
    return [(package, k, v, kind, s) for (k, v, kind), s in sorted(found.items())]


def _ours(api_key: int, kind: str) -> type[Struct]:
    return request_class(api_key) if kind == "request" else response_class(api_key)


def _positional(cls: type[Struct], v: int) -> list[FieldInfo]:
    return [f for f in cls._FIELDS if f.tag is None and f.versions[0] <= v <= f.versions[1]]


def _tname(t: Any) -> str:
    return (t if inspect.isclass(t) else type(t)).__name__


def _flatten(types: list[Any]) -> tuple[list[Any], list[Any]]:
    """Leaf types of a schema whose inline sub-Schemas group fields Kafka lists flat, and the shape
    to re-nest values with."""
    leaves: list[Any] = []
    shape: list[Any] = []
    for t in types:
        if _tname(t) == "Schema":
            sub_leaves, sub_shape = _flatten(list(t.fields))
            leaves += sub_leaves
            shape.append(sub_shape)
        else:
            leaves.append(t)
            shape.append(None)
    return leaves, shape


def _nest(shape: list[Any], values: Any) -> tuple[Any, ...]:
    return tuple(next(values) if s is None else _nest(s, values) for s in shape)


def to_theirs(obj: Struct, cls: type[Struct], v: int, flexible: bool, schema: Any) -> tuple[Any, ...]:
    fields = _positional(cls, v)
    theirs = list(schema.fields)
    has_tags = bool(theirs) and _tname(theirs[-1]) == "TaggedFields"
    if has_tags != flexible:
        raise Mismatch(f"{cls.__qualname__} v{v}: flexible={flexible} but their schema has tags={has_tags}")
    body = theirs[:-1] if has_tags else theirs
    leaves, shape = _flatten(body)
    if len(leaves) != len(fields):
        raise Mismatch(f"{cls.__qualname__} v{v}: {len(leaves)} fields vs our {len(fields)}")
    flat = [_conv(getattr(obj, f.attr), f, v, flexible, t) for f, t in zip(fields, leaves)]
    out = list(_nest(shape, iter(flat)))
    if has_tags:
        out.append({})
    return tuple(out)


def _conv(value: Any, f: FieldInfo, v: int, flexible: bool, t: Any) -> Any:
    tn = _tname(t)
    if tn == "BitField":  # their set-of-bits view of an int32
        return {i for i in range(32) if value >> i & 1}
    if f.type.startswith("[]"):
        if tn not in ("Array", "CompactArray"):
            raise Mismatch(f"{f.attr}: {tn} for an array")
        if value is None:
            return None
        elem = t.array_of
        if f.struct is not None and _tname(elem) != "Schema":
            # Their array of a bare type where Kafka has a one-field struct: the same bytes.
            inner = _positional(f.struct, v)
            if len(inner) != 1 or flexible:
                raise Mismatch(f"{f.attr}: array of {_tname(elem)} for a struct")
            return [_conv(getattr(e, inner[0].attr), inner[0], v, flexible, elem) for e in value]
        if f.struct is not None:
            return [to_theirs(e, f.struct, v, flexible, elem) for e in value]
        return [_scalar(e) for e in value]
    if f.struct is not None:
        if tn != "Schema":
            raise Mismatch(f"{f.attr}: {tn} for a struct")
        return None if value is None else to_theirs(value, f.struct, v, flexible, t)
    return _scalar(value)


def _scalar(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def _walk(x: Any) -> list[Any]:
    if isinstance(x, tuple | list):
        return [y for e in x for y in _walk(e)]
    return [x]


def norm(x: Any) -> Any:
    """Comparable form: drop tag dicts, bytes for buffers, None for the zero UUID."""
    if isinstance(x, tuple):
        return tuple(norm(e) for e in x if not isinstance(e, dict))
    if isinstance(x, list):
        return [norm(e) for e in x]
    if isinstance(x, memoryview | bytearray):
        return bytes(x)
    if isinstance(x, UUID) and x == ZERO:
        return None
    return x


# Their classes that disagree with Kafka's schemas (checked against the JSON): not our bugs.
KNOWN_BAD = {
    ("kafka.protocol.old", 29, 2): "DescribeAclsRequest v2 is flexible in Kafka; theirs has no tagged fields",
    ("kafka.protocol.old", 29, 2, "response"): "DescribeAclsResponse v2 is flexible in Kafka",
    ("aiokafka.protocol", 29, 2): "DescribeAclsRequest v2 is flexible in Kafka; theirs has no tagged fields",
    ("aiokafka.protocol", 29, 2, "response"): "DescribeAclsResponse v2 is flexible in Kafka",
    ("aiokafka.protocol", 2, 4): "their ListOffsets v4 current_leader_epoch is int64 (Kafka: int32); "
                                 "aiokafka marks v4 unsupported",
    ("aiokafka.protocol", 2, 5): "same int64 current_leader_epoch as v4",
}


def _known_bad(p: tuple[str, int, int, str, Any]) -> str | None:
    return KNOWN_BAD.get((p[0], p[1], p[2]) if p[3] == "request" else (p[0], p[1], p[2], "response"))


PAIRS = [p for lib in ("kafka.protocol.old", "aiokafka.protocol") for p in _discover(lib)
         if p[1] in API_KEYS and API_KEYS[p[1]].supports(p[2])]


def _id(p: tuple[str, int, int, str, Any]) -> str:
    return f"{p[0].split('.')[0]}-{API_KEYS[p[1]].name}{p[3].title()}-v{p[2]}"


def test_discovered_enough_pairs() -> None:
    libs = {p[0] for p in PAIRS}
    assert libs == {"kafka.protocol.old", "aiokafka.protocol"}, libs
    assert len(PAIRS) >= 100
    checked = [p for p in PAIRS if not _known_bad(p)]
    print(f"\ncross-checked (library, api, version, kind) pairs: {len(checked)} "
          f"(+{len(PAIRS) - len(checked)} known-bad skipped); distinct (api, version): "
          f"{len({(p[1], p[2]) for p in checked})}; per library: "
          f"{ {lib: sum(p[0] == lib for p in checked) for lib in libs} }")


@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_same_bytes_both_ways(pair: tuple[str, int, int, str, Any]) -> None:
    _lib, key, v, kind, schema = pair
    reason = _known_bad(pair)
    if reason:
        pytest.skip(reason)
    cls = _ours(key, kind)
    flexible = is_flexible(cls, v)

    @PROFILE
    @given(struct_strategy(cls, v, flexible, tagged_defaults=True))
    def check(obj: Struct) -> None:
        values = to_theirs(obj, cls, v, flexible, schema)
        ours = obj.encode(v)
        assert schema.encode(values) == ours
        assert cls.decode(ours, v) == obj
        theirs = schema.decode(io.BytesIO(ours))
        assert schema.encode(theirs) == ours
        if not any(isinstance(x, set) for x in _walk(values)):
            assert norm(theirs) == norm(values)

    try:
        to_theirs(cls(), cls, v, flexible, schema)
    except Mismatch as e:
        pytest.fail(f"schema mismatch: {e}")
    check()
