"""Codecs: round trips, snappy in both framings, bounded output (bombs), corrupt input."""

from __future__ import annotations

import os

import cramjam
import pytest
import snappy
from kafka.codec import lz4_encode, snappy_encode

from kafka_wire.errors import ErrorCode
from kafka_wire.records import Compression, InvalidBatch, compress, decompress

DATA = os.urandom(5000) + b"abcdefgh" * 40000 + os.urandom(100)


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip(codec: Compression) -> None:
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, memoryview(compress(codec, DATA))) == DATA


def test_snappy_both_framings() -> None:
    xerial = compress(Compression.SNAPPY, DATA)
    assert xerial.startswith(b"\x82SNAPPY\x00")
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(DATA))) == DATA
    assert decompress(Compression.SNAPPY, snappy.compress(DATA)) == DATA
    assert decompress(Compression.SNAPPY, snappy_encode(DATA, xerial_compatible=True)) == DATA


def test_lz4_from_kafka_python() -> None:
    assert decompress(Compression.LZ4, lz4_encode(DATA)) == DATA


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_bomb_is_capped(codec: Compression) -> None:
    bomb = compress(codec, bytes(20 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(InvalidBatch) as e:
        decompress(codec, bomb, max_size=1 << 20)
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert len(decompress(codec, bomb, max_size=20 << 20)) == 20 << 20


def test_snappy_declared_length_checked_before_allocation() -> None:
    forged = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10  # declares 4 GiB
    with pytest.raises(InvalidBatch):
        decompress(Compression.SNAPPY, forged, max_size=1 << 20)


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_corrupt_and_truncated(codec: Compression) -> None:
    good = compress(codec, DATA)
    for bad in (good[: len(good) // 2], good[:-1], b"\x00" * 40, os.urandom(64)):
        with pytest.raises(InvalidBatch):
            decompress(codec, bad)


def test_unknown_codec() -> None:
    with pytest.raises(InvalidBatch) as e:
        decompress(6, b"xx")
    assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
