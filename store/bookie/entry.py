"""The framing of one ledger entry as stored on a bookie and sent over the wire.

    [ledger_id:int64][entry_id:int64][lac:int64][crc32c:uint32][payload]

The CRC32C covers the 24 header bytes before it and the payload. The writing client computes
it; the bookie verifies it on add; the reading client verifies it on read (and that the ids
are the ones it asked for).
"""

from __future__ import annotations

import struct

import crc32c

HEADER = struct.Struct(">qqqI")
HEADER_SIZE = HEADER.size  # 28
_IDS = struct.Struct(">qqq")


class EntryDigestError(ValueError):
    """An entry whose checksum or ids do not match."""


def pack_entry(
    ledger_id: int, entry_id: int, lac: int, payload: bytes | memoryview, *, prefix: bytes = b""
) -> bytes:
    """The entry bytes; `prefix` goes before `payload` in the payload area (one copy in all)."""
    ids = _IDS.pack(ledger_id, entry_id, lac)
    crc = crc32c.crc32c(payload, crc32c.crc32c(prefix, crc32c.crc32c(ids)))
    return b"".join((ids, struct.pack(">I", crc), prefix, payload))


def unpack_entry(
    buf: bytes | bytearray | memoryview, ledger_id: int | None = None, entry_id: int | None = None
) -> tuple[int, int, int, memoryview]:
    """Verify and split an entry: (ledger_id, entry_id, lac, payload view)."""
    mv = memoryview(buf)
    if len(mv) < HEADER_SIZE:
        raise EntryDigestError(f"entry of {len(mv)} bytes is shorter than its {HEADER_SIZE}-byte header")
    lid, eid, lac, crc = HEADER.unpack_from(mv, 0)
    payload = mv[HEADER_SIZE:]
    actual = crc32c.crc32c(payload, crc32c.crc32c(mv[:24]))
    if actual != crc:
        raise EntryDigestError(f"checksum mismatch in ledger {lid} entry {eid}: stored {crc:#010x}, computed {actual:#010x}")
    if ledger_id is not None and lid != ledger_id:
        raise EntryDigestError(f"entry belongs to ledger {lid}, expected {ledger_id}")
    if entry_id is not None and eid != entry_id:
        raise EntryDigestError(f"entry has id {eid}, expected {entry_id}")
    return lid, eid, lac, payload


def peek_ids(buf: bytes | memoryview) -> tuple[int, int, int]:
    """(ledger_id, entry_id, lac) without verifying: for the bookie's routing."""
    return _IDS.unpack_from(buf, 0)
