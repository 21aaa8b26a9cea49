"""Framing of the bookie protocol, shared by the server and the client.

Request:  [frame_len:int32][op:u8][flags:u8][request_id:u64][body]
Response: [frame_len:int32][op:u8][status:u8][request_id:u64][body]

frame_len counts the bytes after itself (so >= 10). Bodies, all integers big-endian:

    ADD               req [ledger:i64][packed entry]           resp [ledger:i64][entry:i64]
    READ              req [ledger:i64][entry:i64]  (-1: last)   resp [packed entry]
    READ_RANGE        req [ledger:i64][first:i64][last:i64][max_bytes:u32]
                      resp ([len:u32][packed entry])*          (whole entries, at least one;
                                                               the entry logs' record format)
    READ_LAC          req [ledger:i64]                          resp [lac:i64][last_entry:i64]
    READ_LAC_LONGPOLL req [ledger:i64][previous_lac:i64][timeout_ms:u32]   resp [lac:i64]
    FENCE             req [ledger:i64]                          resp [lac:i64][last_entry:i64]
    DELETE_LEDGER     req [ledger:i64]                          resp (empty)
    WRITE_LAC         req [ledger:i64][lac:i64]                 resp (empty)

A response with a status other than OK carries a UTF-8 message as its body.

Flags: FLAG_RECOVERY on ADD, FLAG_FENCE on READ, FLAG_BACKGROUND on READ_RANGE (a bulk read the
bookie sends from a lower-priority thread, holding that connection's other responses until it
is out: for connections that only read, such as a scan's).
"""

from __future__ import annotations

import struct
from enum import IntEnum

from store.framing import Buffer

HEADER = struct.Struct(">iBBQ")  # frame_len, op, flags|status, request_id
HEADER_SIZE = HEADER.size  # 14
FRAME_HEAD = struct.Struct(">BBQ")  # the header after frame_len: op, flags|status, request_id
FRAME_OVERHEAD = HEADER_SIZE - 4  # bytes counted by frame_len besides the body
DEFAULT_MAX_FRAME = 16 << 20

LEDGER = struct.Struct(">q")
LEDGER_ENTRY = struct.Struct(">qq")
RANGE_REQ = struct.Struct(">qqqI")
LONGPOLL_REQ = struct.Struct(">qqI")
LAC_RESP = struct.Struct(">qq")
WRITE_LAC_REQ = struct.Struct(">qq")
LEN = struct.Struct(">I")

FLAG_RECOVERY = 0x01  # ADD: a recovery writer may add to a fenced ledger
FLAG_FENCE = 0x02  # READ: fence the ledger while reading
FLAG_BACKGROUND = 0x04  # READ_RANGE: a bulk read, sent at a lower priority than adds are taken


class Op(IntEnum):
    ADD = 1
    READ = 2
    READ_RANGE = 3
    READ_LAC = 4
    READ_LAC_LONGPOLL = 5
    FENCE = 6
    DELETE_LEDGER = 7
    WRITE_LAC = 8  # explicit LAC from an idle writer (BookKeeper's explicitLacInterval)


def frame(op: int, flags_or_status: int, request_id: int, body_len: int) -> bytes:
    """The 14-byte header of a frame whose body (of body_len bytes) follows it."""
    return HEADER.pack(FRAME_OVERHEAD + body_len, op, flags_or_status, request_id)


def encode(op: int, flags_or_status: int, request_id: int, *body: Buffer) -> list[Buffer]:
    """A whole frame as a list of buffers for transport.writelines (no payload copy)."""
    n = 0
    for b in body:
        n += len(b)
    return [frame(op, flags_or_status, request_id, n), *body]


def decode_range(body: bytes | bytearray | memoryview) -> list[memoryview]:
    """The entries of a READ_RANGE response, as views of it (no copy)."""
    mv = memoryview(body)
    out: list[memoryview] = []
    pos = 0
    end = len(mv)
    while pos < end:
        if pos + 4 > end:
            raise ValueError("truncated READ_RANGE response")
        (n,) = LEN.unpack_from(mv, pos)
        pos += 4
        if pos + n > end:
            raise ValueError("truncated entry in READ_RANGE response")
        out.append(mv[pos : pos + n])
        pos += n
    return out
