"""Cross-check against kafka-python 3.0.12's own schema-interpreting codec (`kafka.protocol`, the
ApiMessage classes built from the JSON it bundles): same bytes for the same values, tagged fields
included, and their decoder reads our bytes back to the same encoding."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from typing import Any

import pytest
from hypothesis import given

from kafka_wire.api import API_KEYS, request_class, response_class
from kafka_wire.primitives import Struct
from tests.kafka_wire.test_messages_roundtrip import PROFILE, _present, is_flexible, struct_strategy


class Mismatch(Exception):
    pass


def _discover() -> list[tuple[int, int, str, Any]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import kafka.protocol as kp
            from kafka.protocol.api_message import ApiMessage
            classes: set[Any] = set()
            for info in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
                if ".old" in info.name or ".schemas" in info.name:
                    continue
                try:
                    mod = importlib.import_module(info.name)
                except Exception:
                    continue
                for obj in vars(mod).values():
                    if (inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                            and getattr(obj, "_json", None)):
                        classes.add(obj)
    except ImportError:
        return []
    out = []
    for cls in sorted(classes, key=lambda c: (c.API_KEY, c.type)):
        spec = API_KEYS.get(cls.API_KEY)
        if spec is None:
            continue
        for v in range(spec.min_version, min(spec.max_version, cls.max_version) + 1):
            out.append((cls.API_KEY, v, cls.type, cls))
    return out


PAIRS = _discover()


def to_theirs(obj: Struct, cls: type[Struct], v: int, flexible: bool, their_cls: Any, top: bool,
              lo: int, hi: int) -> Any:
    # Same JSON, same field order: match fields by position (a few of their names differ). Their
    # 4.3 schemas still list fields of versions Kafka 4.4 removed (below our lowest version `lo`),
    # and lack the fields of versions 4.4 added (above their highest version `hi`).
    theirs = [tf for tf in their_cls._struct._fields if tf.max_version is None or tf.max_version >= lo]
    ours = [f for f in cls._FIELDS if f.versions[0] <= hi]
    if len(theirs) != len(ours):
        raise Mismatch(f"{cls.__qualname__}: {len(theirs)} fields vs our {len(ours)}")
    kwargs: dict[str, Any] = {}
    for f, tf in zip(ours, theirs):
        if not _present(f, v, flexible):
            continue
        name = tf.name
        value = getattr(obj, f.attr)
        if f.struct is not None and value is not None:
            dc = their_cls._struct.fields[name].data_class
            if f.type.startswith("[]"):
                value = [to_theirs(e, f.struct, v, flexible, dc, False, lo, hi) for e in value]
            else:
                value = to_theirs(value, f.struct, v, flexible, dc, False, lo, hi)
        elif isinstance(value, memoryview):
            value = bytes(value)
        elif tf.type_str == "bitfield":  # their set-of-bits view of an int32
            value = {i for i in range(32) if value >> i & 1}
        kwargs[name] = value
    return their_cls(**kwargs, version=v) if top else their_cls(**kwargs)


def test_discovered() -> None:
    assert len({p[0] for p in PAIRS}) >= 50
    print(f"\nkafka-python JSON codec: {len(PAIRS)} (api, version, kind) pairs over "
          f"{len({p[0] for p in PAIRS})} APIs")


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[3].__name__}-v{p[1]}")
def test_same_bytes_as_kafka_python_json_codec(pair: tuple[int, int, str, Any]) -> None:
    key, v, kind, their_cls = pair
    cls = request_class(key) if kind == "request" else response_class(key)
    flexible = is_flexible(cls, v)

    @PROFILE
    @given(struct_strategy(cls, v, flexible, unknown_tags=False))
    def check(obj: Struct) -> None:
        ours = obj.encode(v)
        theirs = to_theirs(obj, cls, v, flexible, their_cls, True, API_KEYS[key].min_version,
                           their_cls.max_version)
        assert bytes(theirs.encode(version=v)) == ours
        assert cls.decode(ours, v) == obj
        if key == 18 and kind == "response" and obj.error_code:  # type: ignore[attr-defined]
            return  # their client reads an ApiVersions error response as v0, as Kafka's does
        back = their_cls.decode(ours, version=v)
        # (their decoded objects lack _header, so encode through their struct codec directly)
        assert bytes(back._struct.encode(back, version=v, compact=flexible, tagged=flexible)) == ours

    check()
