"""Offloaded object names and the index object's layout.

A ledger's data object holds its entries back to back; its index object maps entry id ->
position as a dense array of start offsets (entry ids are dense), with a header naming the
ledger, the entry count, the data length and its sha256. Both names carry the ledger id and a
fresh UUID per attempt, so a retried or concurrent offload never overwrites a good copy."""

from __future__ import annotations

import struct
import uuid
from array import array
from dataclasses import dataclass

PREFIX = "ledgers/"
_MAGIC = b"QOFI"
_HEAD = struct.Struct("<4sIQQQ32s")  # magic, version, ledger id, entries, data size, sha256
_VERSION = 1


def object_names(ledger_id: int) -> tuple[str, str]:
    """(data key, index key) for a new offload attempt of a ledger."""
    base = f"{PREFIX}{ledger_id:020d}-{uuid.uuid4().hex}"
    return base + ".data", base + ".index"


@dataclass(frozen=True)
class LedgerIndex:
    ledger_id: int
    data_size: int
    digest: bytes
    offsets: array  # entries + 1 start offsets; entry i is data[offsets[i]:offsets[i+1]]

    @property
    def entries(self) -> int:
        return len(self.offsets) - 1

    def to_bytes(self) -> bytes:
        head = _HEAD.pack(_MAGIC, _VERSION, self.ledger_id, self.entries, self.data_size, self.digest)
        offs = array("Q", self.offsets)
        if offs.itemsize != 8:
            raise RuntimeError("array('Q') is not 64-bit here")
        return head + offs.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> LedgerIndex:
        magic, version, lid, entries, size, digest = _HEAD.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise ValueError("not an offload index object")
        offs = array("Q")
        offs.frombytes(data[_HEAD.size : _HEAD.size + 8 * (entries + 1)])
        if len(offs) != entries + 1 or offs[-1] != size:
            raise ValueError("truncated offload index object")
        return cls(lid, size, digest, offs)

    def nbytes(self) -> int:
        return _HEAD.size + 8 * len(self.offsets)
