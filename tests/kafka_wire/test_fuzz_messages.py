"""Bad input: decoding any bytes gives a message or one DecodeError, never another exception, a
hang, or an allocation sized by a forged length."""

from __future__ import annotations

import random
import struct
import tracemalloc
from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_wire.api import API_KEYS, request_class
from kafka_wire.exceptions import DecodeError
from kafka_wire.frames import decode_request, decode_response, encode_request, encode_response
from kafka_wire.headers import RequestHeader, request_header_version
from kafka_wire.primitives import FieldInfo, Struct
from tests.kafka_wire.test_messages_roundtrip import CASES, PROFILE, _id, _present, is_flexible

_SAMPLE_SCALARS: dict[str, Any] = {
    "bool": True, "int8": -3, "int16": 300, "uint16": 65000, "int32": -70000, "uint32": 4000000000,
    "int64": 1 << 40, "float64": 2.5, "string": "t\u00e9st", "bytes": b"\x00\x01\x02",
    "records": b"\x00" * 12 + b"batch", "uuid": UUID(int=0x1234_5678_9ABC),
}


def rich(cls: type[Struct], v: int, flexible: bool) -> Struct:
    """A deterministic value with every present field set, arrays of two, and an unknown tag."""
    kwargs: dict[str, Any] = {}
    for f in cls._FIELDS:
        if _present(f, v, flexible):
            kwargs[f.attr] = _rich_field(f, v, flexible)
    if flexible:
        kwargs["unknown_tagged_fields"] = ((1000, b"\x07\x08"),)
    return cls(**kwargs)


def _rich_field(f: FieldInfo, v: int, flexible: bool) -> Any:
    def one() -> Any:
        return rich(f.struct, v, flexible) if f.struct is not None else _SAMPLE_SCALARS[f.type.removeprefix("[]")]

    if f.type.startswith("[]"):
        return [one(), one()]
    return one()


def mutations(data: bytes, rng: random.Random) -> list[bytes]:
    n = len(data)
    out = [data[:i] for i in range(n)]  # every truncation
    for _ in range(40):
        i = rng.randrange(n)
        out.append(data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:])
    for _ in range(15):
        i = rng.randrange(n + 1)
        out.append(data[:i] + rng.randbytes(rng.randint(1, 8)) + data[i:])
        j = rng.randrange(n)
        out.append(data[:j] + data[j + rng.randint(1, 4):])
    attacks = [struct.pack(">i", x) for x in (0x7FFFFFFF, -1, -2, -(1 << 31), 1 << 20)]
    attacks += [struct.pack(">h", x) for x in (0x7FFF, -1, -2)]
    attacks += [b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80", b"\xfe\xff\x03"]
    positions = range(n) if n <= 64 else sorted(rng.sample(range(n), 64))
    for i in positions:
        for a in attacks:
            out.append(data[:i] + a + data[i + len(a):])
    return out


def only_decode_errors(decode: Callable[[bytes], object], inputs: list[bytes]) -> int:
    """Decode each input; return how many were rejected (any exception but DecodeError fails)."""
    rejected = 0
    for data in inputs:
        try:
            decode(data)
        except DecodeError as e:
            assert e.what and e.offset >= -1
            # The catch-all in Struct.decode_from must never be what caught it: explicit checks do.
            assert not e.what.startswith("malformed input"), e
            rejected += 1
    return rejected


def _framed_decoder(cls: type[Struct], v: int) -> tuple[bytes, Callable[[bytes], object]]:
    obj = rich(cls, v, is_flexible(cls, v))
    key = cls.API_KEY  # type: ignore[attr-defined]
    if key is None or cls.__name__ not in (API_KEYS[key].request_name, API_KEYS[key].response_name):
        # Headers and data schemas (record schemas carry their record type as API_KEY): no frame.
        return obj.encode(v), lambda b: cls.decode(b, v)
    if cls is request_class(key):
        client_id = "fuzz" if request_header_version(key, v) > 0 else ""  # header v0 has no client id
        header = RequestHeader(api_key=key, api_version=v, correlation_id=5, client_id=client_id)
        return encode_request(header, obj)[4:], decode_request
    return encode_response(key, v, 5, obj)[4:], lambda b: decode_response(key, v, b)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_mutated_frames_only_decode_error(case: tuple[type[Struct], int]) -> None:
    cls, v = case
    data, decode = _framed_decoder(cls, v)
    decode(data)  # the unmutated frame is valid
    rng = random.Random(f"{cls.__qualname__}-{v}")
    inputs = mutations(data, rng)
    rejected = only_decode_errors(decode, inputs)
    assert rejected >= len(data)  # every strict truncation is rejected, at least


@pytest.mark.parametrize("case", CASES[::7], ids=_id)
def test_arbitrary_bytes_only_decode_error(case: tuple[type[Struct], int]) -> None:
    cls, v = case

    @PROFILE
    @given(st.binary(max_size=64))
    def check(data: bytes) -> None:
        only_decode_errors(lambda b: cls.decode(b, v), [data])

    check()


@PROFILE
@given(st.binary(max_size=80))
def test_arbitrary_request_frames(data: bytes) -> None:
    only_decode_errors(decode_request, [data])


@PROFILE
@given(st.integers(0, 87), st.integers(-2, 20), st.binary(max_size=60))
def test_arbitrary_bodies_after_valid_header(key: int, version: int, body: bytes) -> None:
    hv = 2 if API_KEYS[key].is_flexible(version) else 1
    header = struct.pack(">hhih", key, version, 1, 1) + b"c" + (b"\x00" if hv == 2 else b"")
    only_decode_errors(decode_request, [header + body])


def test_unknown_api_key_and_version_are_named() -> None:
    with pytest.raises(DecodeError) as e:
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))
    assert "999" in str(e.value) and e.value.offset == 0
    with pytest.raises(DecodeError) as e:
        decode_request(struct.pack(">hhih", 0, 99, 1, -1))
    assert "99" in str(e.value) and "Produce" in str(e.value)


@pytest.mark.parametrize("forged", [0x7FFFFFFF, 0x10000000])
def test_forged_counts_allocate_nothing_big(forged: int) -> None:
    # Metadata v4 request: topics array (int32 count) then allow_auto_topic_creation.
    data = struct.pack(">i", forged) + b"\x00" * 8
    cls = request_class(3)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError) as e:
            cls.decode(data, 4)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(forged) in str(e.value) and e.value.where == "MetadataRequest.topics"
    assert peak < 256 * 1024
    # Same in a flexible version: varint count.
    with pytest.raises(DecodeError):
        cls.decode(b"\xff\xff\xff\xff\x07" + b"\x00" * 8, 9)


def test_forged_string_and_bytes_lengths() -> None:
    cls = request_class(36)  # SaslAuthenticate v0: bytes auth_bytes
    with pytest.raises(DecodeError) as e:
        cls.decode(struct.pack(">i", 1 << 30) + b"ab", 0)
    assert e.value.where == "SaslAuthenticateRequest.auth_bytes" and e.value.offset == 0
    hs = request_class(17)  # SaslHandshake: string mechanism
    with pytest.raises(DecodeError):
        hs.decode(struct.pack(">h", 0x7FFF) + b"PLAIN", 1)
    with pytest.raises(DecodeError) as e:
        hs.decode(struct.pack(">h", 2) + b"\xff\xfe", 1)
    assert "UTF-8" in str(e.value) and e.value.offset == 2
