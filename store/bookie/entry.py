"""The framing of one ledger entry as stored on a bookie and sent over the wire.

    [ledger_id:int64][entry_id:int64][lac:int64][crc32c:uint32][payload]

The CRC32C covers the 24 header bytes before it and the payload. The writing client computes
it; the bookie verifies it on add; the reading client verifies it on read (and that the ids
are the ones it asked for).

What each CRC32C pass on the produce path protects (a pass that protects nothing another one
does not is not made):
- the Kafka batch CRC, checked by the gateway: the batch from the producer to the gateway
  (a corrupt batch is refused with CORRUPT_MESSAGE, as Kafka does);
- this digest, computed by the ledger writer: ids, LAC and payload from the gateway's memory
  to the bookie's disk and back to every reader, across every copy in between;
- the bookie's check on add: the entry between the writer and the bookie, before it is
  acknowledged (an entry corrupted on the way is refused, and the writer resends it);
- the reader's check: the entry from the bookie's disk (and the network) back to the reader.
The journal does not checksum an entry again: its record checksum covers the record framing
and the entry's header (with this digest), and replay verifies this digest (see journal.py).
"""

from __future__ import annotations

import struct

import crc32c

from store.framing import Buffer

HEADER = struct.Struct(">qqqI")
HEADER_SIZE = HEADER.size  # 28
_IDS = struct.Struct(">qqq")
_CRC = struct.Struct(">I")


class EntryDigestError(ValueError):
    """An entry whose checksum or ids do not match."""


def pack_entry_parts(
    ledger_id: int, entry_id: int, lac: int, payload: bytes | memoryview, *, prefix: bytes = b""
) -> list[Buffer]:
    """The entry as [header + prefix, payload] for a writelines: `prefix` goes before
    `payload` in the payload area, and the payload is not copied."""
    ids = _IDS.pack(ledger_id, entry_id, lac)
    crc = crc32c.crc32c(payload, crc32c.crc32c(prefix, crc32c.crc32c(ids)))
    return [b"".join((ids, _CRC.pack(crc), prefix)), payload]


def pack_entry(
    ledger_id: int, entry_id: int, lac: int, payload: bytes | memoryview, *, prefix: bytes = b""
) -> bytes:
    """The entry bytes, in one piece (pack_entry_parts without the copy is the hot path's)."""
    return b"".join(pack_entry_parts(ledger_id, entry_id, lac, payload, prefix=prefix))


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
