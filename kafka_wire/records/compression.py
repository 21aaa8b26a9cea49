"""Compression codecs of record batches: gzip, snappy, lz4 (frame format), zstd.

Decompression is always bounded by `max_size` (decompression bombs): output is produced in
chunks and anything beyond the cap is an InvalidBatch, never a large allocation."""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from kafka_wire.errors import ErrorCode
from kafka_wire.exceptions import DecodeError
from kafka_wire.records.exceptions import InvalidBatch

_Buf = bytes | bytearray | memoryview

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024
_CHUNK = 1 << 20

# Java's xerial SnappyOutputStream framing: magic, version 1, min compatible version 1, then
# blocks of [int32 compressed length][raw snappy]. Kafka's Java client and kafka-python write it;
# librdkafka writes raw snappy. Both are read.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024

_zstd_c = zstandard.ZstdCompressor(level=3)
_zstd_d = zstandard.ZstdDecompressor()


class Compression(IntEnum):
    """Codec ids as stored in the low 3 bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def compress(codec: Compression, data: _Buf) -> bytes:
    """Compress a batch's records section as Kafka's Java client would."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == Compression.SNAPPY:
        mv = memoryview(data)
        parts = [_XERIAL_HEADER]
        for i in range(0, len(mv), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(mv[i : i + _XERIAL_BLOCK]))
            parts.append(struct.pack(">i", len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == Compression.LZ4:
        # Java's KafkaLZ4BlockInputStream decodes each block on its own: independent blocks,
        # 64 KiB, no content size.
        return bytes(
            lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
    if codec == Compression.ZSTD:
        return bytes(_zstd_c.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: _Buf, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress, raising InvalidBatch (CORRUPT_MESSAGE) for malformed input or output over
    `max_size` bytes."""
    if codec == Compression.NONE:
        if len(data) > max_size:
            raise _bomb(max_size)
        return bytes(data)
    try:
        if codec == Compression.GZIP:
            return _gunzip(data, max_size)
        if codec == Compression.SNAPPY:
            return _unsnappy(data, max_size)
        if codec == Compression.LZ4:
            return _unlz4(data, max_size)
        if codec == Compression.ZSTD:
            return _unzstd(data, max_size)
    except DecodeError:
        raise
    except Exception as e:  # codec libraries raise assorted types for bad input
        raise InvalidBatch(f"{Compression(codec).name.lower()} stream is corrupt: {e}") from e
    raise InvalidBatch(f"unknown compression codec id {codec}", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def _bomb(max_size: int) -> InvalidBatch:
    return InvalidBatch(f"decompressed records exceed the {max_size} byte limit")


def _gunzip(data: _Buf, max_size: int) -> bytes:
    out = bytearray()
    src: _Buf = data
    while True:  # Java's GZIPInputStream reads concatenated members
        d = zlib.decompressobj(47)
        buf = src
        while True:
            room = max_size - len(out) + 1
            out += d.decompress(buf, min(room, _CHUNK))
            if len(out) > max_size:
                raise _bomb(max_size)
            if d.eof or not d.unconsumed_tail:
                break
            buf = d.unconsumed_tail
        if not d.eof:
            raise InvalidBatch("gzip stream is truncated")
        src = d.unused_data
        if not src:
            return bytes(out)


def _raw_snappy(block: _Buf, out: bytearray, max_size: int) -> None:
    # The preamble declares the output length: check it against the cap before allocating.
    n, shift, i = 0, 0, 0
    while True:
        if i >= len(block) or i >= 5:
            raise InvalidBatch("snappy block has a bad length preamble")
        b = block[i]
        n |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            break
        shift += 7
    if len(out) + n > max_size:
        raise _bomb(max_size)
    start = len(out)
    out.extend(bytes(n))
    written = cramjam.snappy.decompress_raw_into(block, memoryview(out)[start:])
    if written != n:
        raise InvalidBatch("snappy block decoded to fewer bytes than declared")


def _unsnappy(data: _Buf, max_size: int) -> bytes:
    mv = memoryview(data)
    out = bytearray()
    if mv[:8] != _XERIAL_MAGIC:
        _raw_snappy(mv, out, max_size)
        return bytes(out)
    pos, end = 16, len(mv)
    if end < 16:
        raise InvalidBatch("xerial snappy header is truncated")
    while pos < end:
        if pos + 4 > end:
            raise InvalidBatch("xerial snappy block length is truncated")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise InvalidBatch("xerial snappy block overruns the data")
        _raw_snappy(mv[pos : pos + n], out, max_size)
        pos += n
    return bytes(out)


def _unlz4(data: _Buf, max_size: int) -> bytes:
    out = bytearray()
    src: _Buf = data
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        chunk = d.decompress(src, min(max_size - len(out) + 1, _CHUNK))
        while True:
            out += chunk
            if len(out) > max_size:
                raise _bomb(max_size)
            if d.eof or d.needs_input:
                break
            chunk = d.decompress(b"", min(max_size - len(out) + 1, _CHUNK))
        if not d.eof:
            raise InvalidBatch("lz4 frame is truncated")
        src = d.unused_data
        if not src:
            return bytes(out)


def _unzstd(data: _Buf, max_size: int) -> bytes:
    # Neither the frame's declared content size nor stream_reader (which hides truncation) is
    # trusted: input is fed in steps small enough that even all-RLE blocks (at most 32768x
    # expansion) cannot overshoot the cap by more than a couple of MiB.
    mv = memoryview(data)
    out = bytearray()
    pos, end = 0, len(mv)
    while pos < end:
        d = _zstd_d.decompressobj()
        while not d.eof:
            if pos >= end:
                raise InvalidBatch("zstd frame is truncated")
            step = max(64, min(1 << 16, (max_size - len(out)) >> 15))
            out += d.decompress(mv[pos : pos + step])
            pos += step
            if len(out) > max_size:
                raise _bomb(max_size)
        pos -= len(d.unused_data)
    return bytes(out)
