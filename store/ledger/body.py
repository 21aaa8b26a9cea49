"""What the ledger client puts in an entry's payload: [cumulative length:int64][user payload].

The running length (user bytes in the ledger up to and including this entry) lets recovery
set a closed ledger's length from its last entry alone, as BookKeeper's entry header does.
"""

from __future__ import annotations

import struct

_LEN = struct.Struct(">q")
BODY_OVERHEAD = _LEN.size


def length_prefix(cumulative_length: int) -> bytes:
    """The bytes that go before the user payload (pack_entry's prefix: no extra payload copy)."""
    return _LEN.pack(cumulative_length)


def unwrap(body: memoryview) -> tuple[int, memoryview]:
    if len(body) < BODY_OVERHEAD:
        raise ValueError(f"ledger entry body of {len(body)} bytes lacks its length prefix")
    return _LEN.unpack_from(body, 0)[0], body[BODY_OVERHEAD:]
