"""A zero-copy view of one magic-v2 RecordBatch, its validation, and in-place patching.

Layout (big-endian), offsets from the batch start:
  0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
  17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
  35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
  57 recordCount int32 | 61 records...
The CRC32C covers bytes 21..end, so baseOffset, batchLength and partitionLeaderEpoch can be
rewritten without touching it; anything else needs the CRC recomputed."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from enum import IntEnum
from typing import NoReturn, overload

from crc32c import crc32c

from kafka_wire.errors import ErrorCode
from kafka_wire.records.compression import DEFAULT_MAX_DECOMPRESSED, Compression, decompress
from kafka_wire.records.exceptions import InvalidBatch
from kafka_wire.records.record import Record, iter_records, keyless_records

Buffer = bytes | bytearray | memoryview

LOG_OVERHEAD = 12  # baseOffset + batchLength: the part outside batchLength
BATCH_OVERHEAD = 61
MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD
MIN_LEGACY_LENGTH = 14  # Kafka's smallest v0 message, so v0/v1 input is recognised as such

OFF_BASE_OFFSET = 0
OFF_LENGTH = 8
OFF_LEADER_EPOCH = 12
OFF_MAGIC = 16
OFF_CRC = 17
OFF_ATTRIBUTES = 21
OFF_LAST_OFFSET_DELTA = 23
OFF_BASE_TIMESTAMP = 27
OFF_MAX_TIMESTAMP = 35
OFF_PRODUCER_ID = 43
OFF_RECORD_COUNT = 57

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LEN_EPOCH_MAGIC = struct.Struct(">iib")  # batchLength, partitionLeaderEpoch, magic at 8
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_NO_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at 43


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class _HeaderField:
    """A read-only header field of a RecordBatch, by its index in `RecordBatch.header()`."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    @overload
    def __get__(self, batch: None, owner: type) -> _HeaderField: ...
    @overload
    def __get__(self, batch: RecordBatch, owner: type) -> int: ...
    def __get__(self, batch: RecordBatch | None, owner: type) -> int | _HeaderField:
        if batch is None:
            return self
        value: int = batch.header()[self.index]
        return value


class RecordBatch:
    """A view of the batch starting at `offset` in `buf`; reads fields on demand, copies nothing.

    Construction only checks that a length field is present; call `validate()` before trusting
    any other field. Patching methods need a writable buffer (bytearray or writable memoryview).
    """

    __slots__ = ("buf", "offset")

    def __init__(self, buf: Buffer, offset: int = 0) -> None:
        if offset < 0 or len(buf) - offset < LOG_OVERHEAD:
            raise InvalidBatch("truncated batch header", offset=offset)
        self.buf = buf
        self.offset = offset

    # -- header fields -------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return _I64.unpack_from(self.buf, self.offset)[0]

    @property
    def batch_length(self) -> int:
        return _I32.unpack_from(self.buf, self.offset + OFF_LENGTH)[0]

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, as declared (batchLength + 12)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        """Offset in `buf` just past this batch, as declared."""
        return self.offset + self.size

    @property
    def partition_leader_epoch(self) -> int:
        return _I32.unpack_from(self.buf, self.offset + OFF_LEADER_EPOCH)[0]

    @property
    def magic(self) -> int:
        if len(self.buf) - self.offset <= OFF_MAGIC:
            raise InvalidBatch("truncated batch header", offset=self.offset)
        return self.buf[self.offset + OFF_MAGIC]

    def header(self) -> tuple[int, ...]:
        """All 13 header fields at once: (baseOffset, batchLength, partitionLeaderEpoch, magic,
        crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
        producerEpoch, baseSequence, recordCount)."""
        if len(self.buf) - self.offset < BATCH_OVERHEAD:
            raise InvalidBatch("truncated batch header", offset=self.offset)
        return _HEADER.unpack_from(self.buf, self.offset)

    crc = _HeaderField(4)

    @property
    def attributes(self) -> int:
        return self.header()[5] & 0xFFFF

    @property
    def compression(self) -> int:
        """Codec id; compare with Compression (ids 5-7 are not codecs and fail validate())."""
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon a log cleaner set (KIP-534: in the base timestamp), or None."""
        return self.header()[7] if self.attributes & ATTR_DELETE_HORIZON else None

    last_offset_delta = _HeaderField(6)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    base_timestamp = _HeaderField(7)
    max_timestamp = _HeaderField(8)
    producer_id = _HeaderField(9)
    producer_epoch = _HeaderField(10)
    base_sequence = _HeaderField(11)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap at 2**31 as in Kafka."""
        base = self.base_sequence
        if base < 0:
            return -1
        return (base + self.last_offset_delta) % (1 << 31)

    @property
    def record_count(self) -> int:
        if len(self.buf) - self.offset < BATCH_OVERHEAD:
            raise InvalidBatch("truncated batch header", offset=self.offset)
        return _I32.unpack_from(self.buf, self.offset + OFF_RECORD_COUNT)[0]

    def memoryview(self) -> memoryview:
        """The batch's bytes as a memoryview slice (no copy)."""
        return memoryview(self.buf)[self.offset : self.end]

    # -- validation ----------------------------------------------------------------------------

    def validate(self, *, from_client: bool = True) -> tuple[int, ...]:
        """Check the batch as Kafka's broker does on produce; raise InvalidBatch otherwise.
        Returns the 13 header fields (as `header()`), saving callers a second read.

        Order and error codes follow Kafka 4.x: sizes and CRC give CORRUPT_MESSAGE; a v0/v1
        batch gives INVALID_RECORD (ProduceRequest.validateRecords: "only allowed to contain
        record batches with magic version 2"); the offset/count consistency rules of
        LogValidator.validateBatch give INVALID_RECORD. With `from_client` (produce input) also
        refuse empty batches, control batches, idempotent batches without a sequence and
        batches whose record count disagrees with lastOffsetDelta, as Kafka does for
        AppendOrigin.CLIENT; stored batches (after compaction) may be empty or thinned.
        Records inside are not parsed: see `check_records()`.
        """
        buf, off = self.buf, self.offset
        avail = len(buf) - off
        if avail < BATCH_OVERHEAD:
            _framing_error(buf, off, avail)
        h = _HEADER.unpack_from(buf, off)
        length = h[1]
        if length + LOG_OVERHEAD > avail or h[3] != 2 or length < MIN_BATCH_LENGTH:
            _framing_error(buf, off, avail)
        mv = buf if type(buf) is memoryview else memoryview(buf)
        actual = crc32c(mv[off + OFF_ATTRIBUTES : off + LOG_OVERHEAD + length])
        if actual != h[4]:
            raise InvalidBatch(f"CRC mismatch: stored {h[4]:#010x}, computed {actual:#010x}", offset=off)
        attrs = h[5]
        if attrs & ATTR_COMPRESSION_MASK > Compression.ZSTD:
            raise InvalidBatch(
                f"unknown compression codec id {attrs & ATTR_COMPRESSION_MASK}",
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                offset=off,
            )
        count = h[12]
        if count < 0 or (from_client and count == 0):
            raise InvalidBatch(f"invalid record count {count}", ErrorCode.INVALID_RECORD, offset=off)
        # A stored batch that compaction thinned keeps its lastOffsetDelta with fewer records.
        if from_client and count and h[6] + 1 != count:
            raise InvalidBatch(
                f"lastOffsetDelta {h[6]} is inconsistent with record count {count}",
                ErrorCode.INVALID_RECORD,
                offset=off,
            )
        if from_client:
            if attrs & ATTR_CONTROL:
                raise InvalidBatch(
                    "clients are not allowed to write control records", ErrorCode.INVALID_RECORD, offset=off
                )
            if h[9] >= 0 and h[11] < 0:
                raise InvalidBatch(
                    f"invalid sequence number {h[11]} for producer {h[9]}",
                    ErrorCode.INVALID_RECORD,
                    offset=off,
                )
        return h

    def compute_crc(self) -> int:
        return crc32c(memoryview(self.buf)[self.offset + OFF_ATTRIBUTES : self.end])

    # -- records (rare paths) ------------------------------------------------------------------

    def records_bytes(self, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
        """The records section, decompressed (bounded by `max_size`)."""
        mv = memoryview(self.buf)[self.offset + BATCH_OVERHEAD : self.end]
        return decompress(self.compression, mv, max_size)

    def records(self, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
        """Parse the records lazily; InvalidBatch on any malformation. Validate first."""
        return iter_records(self.records_bytes(max_size), self.record_count)

    def keyless_records(self, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> list[int]:
        """The indexes of the records without a key, from a walk of the (decompressed) records
        section that builds no records (record.keyless_records); InvalidBatch on malformation."""
        mv = memoryview(self.buf)[self.offset + BATCH_OVERHEAD : self.end]
        codec = self.compression
        # uncompressed records are walked in place: nothing is copied, so nothing to bound
        data = mv if codec == Compression.NONE else decompress(codec, mv, max_size)
        return keyless_records(data, self.record_count)

    def check_records(self, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> int:
        """Parse every record (what Kafka's LogValidator does on its slow paths); returns the
        count. The hot path does not do this: the CRC already protects the bytes in transit."""
        n = 0
        for _ in self.records(max_size):
            n += 1
        return n

    # -- in-place patching (needs a writable buffer) -------------------------------------------

    def set_base_offset(self, base_offset: int) -> None:
        """Outside the CRC: no CRC update needed."""
        _I64.pack_into(self.buf, self.offset, base_offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Outside the CRC: no CRC update needed."""
        _I32.pack_into(self.buf, self.offset + OFF_LEADER_EPOCH, epoch)

    def set_log_append_time(self, timestamp_ms: int) -> bool:
        """Mark the batch LogAppendTime with `timestamp_ms` as its max timestamp, as Kafka's
        DefaultRecordBatch.setMaxTimestamp does. Both fields lie inside the CRC, so the CRC is
        recomputed over the whole batch; nothing is written (and False returned) when the batch
        already says exactly this. Recomputing the CRC would launder corruption, so call this
        only after validate()."""
        buf, off = self.buf, self.offset
        attrs = _I16.unpack_from(buf, off + OFF_ATTRIBUTES)[0]
        max_ts = _I64.unpack_from(buf, off + OFF_MAX_TIMESTAMP)[0]
        if attrs & ATTR_TIMESTAMP_TYPE and max_ts == timestamp_ms:
            return False
        _I16.pack_into(buf, off + OFF_ATTRIBUTES, attrs | ATTR_TIMESTAMP_TYPE)
        _I64.pack_into(buf, off + OFF_MAX_TIMESTAMP, timestamp_ms)
        _U32.pack_into(buf, off + OFF_CRC, self.compute_crc())
        return True

    def clear_producer(self) -> bool:
        """Drop the batch's producer identity and transactional flag (producer id, epoch and
        base sequence -1), recomputing the CRC: a batch copied from another cluster, whose
        producer ids mean nothing here. False (nothing written) when it has none. Call only
        after validate(), as set_log_append_time."""
        buf, off = self.buf, self.offset
        attrs = _I16.unpack_from(buf, off + OFF_ATTRIBUTES)[0]
        if _I64.unpack_from(buf, off + OFF_PRODUCER_ID)[0] < 0 and not attrs & ATTR_TRANSACTIONAL:
            return False
        _I16.pack_into(buf, off + OFF_ATTRIBUTES, attrs & ~ATTR_TRANSACTIONAL)
        _NO_PRODUCER.pack_into(buf, off + OFF_PRODUCER_ID, -1, -1, -1)
        _U32.pack_into(buf, off + OFF_CRC, self.compute_crc())
        return True

    def __repr__(self) -> str:
        try:
            h = self.header()
        except InvalidBatch:
            return f"RecordBatch(<truncated> at {self.offset})"
        return (
            f"RecordBatch(base_offset={h[0]}, length={h[1]}, magic={h[3]}, attrs={h[5]:#x}, "
            f"count={h[12]}, producer_id={h[9]})"
        )


def _framing_error(buf: Buffer, off: int, avail: int, *, size_first: bool = True) -> NoReturn:
    """Raise the error for a batch whose framing (sizes or magic) is wrong, `avail` bytes being
    present from `off`. With `size_first`, Kafka's order for produce input (size, then magic,
    then the v2 minimum); without, iter_batches' (a v0/v1 batch is named as such even when it
    is also truncated)."""
    if avail < OFF_MAGIC + 1:
        raise InvalidBatch("truncated batch header", offset=off)
    length, _, magic = _LEN_EPOCH_MAGIC.unpack_from(buf, off + OFF_LENGTH)
    if length < MIN_LEGACY_LENGTH:
        raise InvalidBatch(f"batch length {length} is below the minimum", offset=off)
    if size_first and length + LOG_OVERHEAD > avail:
        raise InvalidBatch(f"batch declares {length + LOG_OVERHEAD} bytes, {avail} present", offset=off)
    if magic != 2:
        raise InvalidBatch(
            f"record batch has magic {magic}: only magic version 2 is accepted",
            ErrorCode.INVALID_RECORD,
            offset=off,
        )
    if length < MIN_BATCH_LENGTH:
        raise InvalidBatch(f"batch length {length} is below the v2 minimum", offset=off)
    raise InvalidBatch(f"batch declares {length + LOG_OVERHEAD} bytes, {avail} present", offset=off)


def data_batches(batches: Sequence[tuple[int, int, Buffer]]) -> Callable[[int], RecordBatch | None]:
    """Look up read batches ((base, last, bytes)) by base offset: the data batch there, or None
    (no such batch, or a control batch)."""
    by_base = {base: data for base, _, data in batches}

    def at(base: int) -> RecordBatch | None:
        data = by_base.get(base)
        if data is None:
            return None
        b = RecordBatch(data)
        return None if b.is_control else b

    return at


def iter_batches(buf: Buffer, offset: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
    """The batches concatenated in buf[offset:end], checking only their framing (lengths and
    magic); InvalidBatch for a truncated tail, a garbage length or a v0/v1 batch. Call
    validate() on each for the CRC."""
    stop = len(buf) if end is None else min(end, len(buf))
    pos = offset
    while pos < stop:
        if stop - pos < OFF_MAGIC + 1:
            _framing_error(buf, pos, stop - pos, size_first=False)
        length, _, magic = _LEN_EPOCH_MAGIC.unpack_from(buf, pos + OFF_LENGTH)
        nxt = pos + LOG_OVERHEAD + length
        if magic != 2 or length < MIN_BATCH_LENGTH or nxt > stop:
            _framing_error(buf, pos, stop - pos, size_first=False)
        yield RecordBatch(buf, pos)
        pos = nxt


def last_complete_batch_end(buf: Buffer, limit: int | None = None, *, min_one: bool = True) -> int:
    """Byte length of the longest prefix of buf[:limit] made of whole batches (for cutting a
    fetch at max_bytes). With `min_one`, the first batch counts even when it alone exceeds
    `limit` (as long as buf holds it), as Kafka returns it so a consumer can always progress
    (KIP-74). A partial tail is not an error here; a garbage length is (InvalidBatch)."""
    stop = len(buf) if limit is None else min(limit, len(buf))
    pos = 0
    n = len(buf)
    while True:
        if n - pos < LOG_OVERHEAD:
            return pos
        length = _I32.unpack_from(buf, pos + OFF_LENGTH)[0]
        if length < MIN_BATCH_LENGTH:
            raise InvalidBatch(f"batch length {length} is below the v2 minimum", offset=pos)
        nxt = pos + LOG_OVERHEAD + length
        if nxt > n or (nxt > stop and not (min_one and pos == 0)):
            return pos
        pos = nxt
