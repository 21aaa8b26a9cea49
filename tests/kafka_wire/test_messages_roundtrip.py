"""Every generated message, every version: schema-driven values encode -> decode -> equal, and the
decoded value re-encodes to identical bytes. Also the value strategies the other codec tests use."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_wire.api import API_KEYS, request_class, response_class, schema_class
from kafka_wire.messages import OTHERS
from kafka_wire.primitives import FieldInfo, Struct

settings.register_profile(
    "kafka_wire", max_examples=10, derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile("kafka_wire")

_INT_RANGES = {"int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
               "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
               "uint16": (0, (1 << 16) - 1), "uint32": (0, (1 << 32) - 1)}


def all_classes() -> list[tuple[type[Struct], int]]:
    """(class, version) for every request, response, header and data schema version."""
    out: list[tuple[type[Struct], int]] = []
    for key in sorted(API_KEYS):
        for cls in (request_class(key), response_class(key)):
            out += [(cls, v) for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]  # type: ignore[attr-defined]
    for name in sorted(OTHERS):
        cls = schema_class(name)
        out += [(cls, v) for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]  # type: ignore[attr-defined]
    return out


def is_flexible(root: type[Struct], version: int) -> bool:
    fmin = root.FLEXIBLE_MIN  # type: ignore[attr-defined]
    return fmin is not None and version >= fmin


def _present(f: FieldInfo, v: int, flexible: bool) -> bool:
    lo, hi = f.versions
    return lo <= v <= hi and (f.tag is None or flexible)


def _nullable(f: FieldInfo, v: int) -> bool:
    return f.nullable is not None and f.nullable[0] <= v <= f.nullable[1]


def _scalar(t: str) -> st.SearchStrategy[Any]:
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.uuids()
    raise AssertionError(t)


def field_strategy(f: FieldInfo, v: int, flexible: bool, tagged_defaults: bool,
                   unknown_tags: bool = True) -> st.SearchStrategy[Any]:
    elem = f.type[2:] if f.type.startswith("[]") else f.type
    if f.struct is not None:
        inner = struct_strategy(f.struct, v, flexible, tagged_defaults, unknown_tags)
    else:
        inner = _scalar(elem)
    s = st.lists(inner, max_size=3) if f.type.startswith("[]") else inner
    return st.none() | s if _nullable(f, v) else s


def struct_strategy(cls: type[Struct], v: int, flexible: bool, tagged_defaults: bool = False,
                    unknown_tags: bool = True) -> st.SearchStrategy[Struct]:
    """Values of cls valid at version v: absent fields keep their defaults."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls._FIELDS:
        if _present(f, v, flexible) and not (tagged_defaults and f.tag is not None):
            kwargs[f.attr] = field_strategy(f, v, flexible, tagged_defaults, unknown_tags)
    if flexible and unknown_tags and not tagged_defaults:
        known = {f.tag for f in cls._FIELDS}
        kwargs["unknown_tagged_fields"] = st.lists(
            st.tuples(st.integers(0, 300).filter(lambda t: t not in known), st.binary(max_size=6)),
            max_size=2, unique_by=lambda t: t[0]).map(lambda ts: tuple(sorted(ts)))
    return st.builds(cls, **kwargs)


CASES = all_classes()


def _id(case: tuple[type[Struct], int]) -> str:
    return f"{case[0].__name__}-v{case[1]}"


def test_every_api_and_version_is_generated() -> None:
    assert len(API_KEYS) == 95
    assert sorted(API_KEYS) == list(range(95))
    # Kafka 4.x removed the ZooKeeper-era inter-broker APIs: their schemas list no version.
    assert [k for k, s in API_KEYS.items() if s.min_version > s.max_version] == [4, 5, 6, 7]
    expected = sum(2 * max(0, s.max_version - s.min_version + 1) for s in API_KEYS.values())
    # + request header 0-2, response header 0-1, ConsumerProtocol{Assignment,Subscription} 0-3, principal 0,
    # AbortedTxn, ControlRecordTypeSchema, EndTxnMarker, KRaftVersionRecord, LeaderChangeMessage 0-1,
    # Snapshot{Header,Footer}Record, VotersRecord, offsets topic: OffsetCommitKey, OffsetCommitValue 0-4,
    # GroupMetadataKey, GroupMetadataValue 0-4,
    # ConsumerGroup{Metadata,PartitionMetadata,MemberMetadata,TargetAssignmentMetadata,
    # TargetAssignmentMember,CurrentMemberAssignment,RegularExpression}{Key,Value} 0 (KIP-848),
    # ShareGroup{Metadata,MemberMetadata}{Key,Value} 0,
    # transaction log: TransactionLogKey, TransactionLogValue 0-1
    data = 1 + 1 + 1 + 1 + 2 + 2 + 1 + 1 + 5 + 1 + 5 + 14 + 4 + 1 + 2
    assert len(CASES) == expected + 3 + 2 + 4 + 4 + 1 + data
    assert len(CASES) > 600


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_roundtrip(case: tuple[type[Struct], int]) -> None:
    cls, v = case

    @PROFILE
    @given(struct_strategy(cls, v, is_flexible(cls, v)))
    def check(obj: Struct) -> None:
        data = obj.encode(v)
        back = cls.decode(data, v)
        assert back == obj
        assert back.encode(v) == data

    check()
