"""Key-shared mode of share groups (`quire.share.mode=key_shared`, Pulsar's Key_Shared): the
record keys SharePartition orders by. Only groups in that mode decode records for their keys,
and SharePartition asks only for batches holding records whose key it does not know yet (about
once per record and group); shared mode reads batch headers only."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from coordinator.share.partition import KeysOf
from kafka_wire.records.batch import data_batches


def key_id(key: bytes | None) -> int:
    """A key's id: a 64-bit hash, the same in every process (a null key hashes as the empty one,
    as in Pulsar)."""
    return int.from_bytes(hashlib.blake2b(key or b"", digest_size=8).digest(), "big")


def record_keys(batches: Sequence[tuple[int, int, bytes | memoryview]]) -> KeysOf:
    """The share-partition's `keys` for these read batches ((base, last, bytes))."""
    batch_at = data_batches(batches)

    def keys(base: int) -> list[tuple[int, int]]:
        b = batch_at(base)
        if b is None:
            return []
        return [(b.base_offset + r.offset_delta, key_id(r.key)) for r in b.records()]

    return keys
