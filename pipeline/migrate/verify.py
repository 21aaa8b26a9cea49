"""`quire migrate --verify`: both sides read per partition by a Kafka consumer (read_committed),
up to the offset the copy reached, into a record count and a hash chained over every record's
(offset, key, value, headers, timestamp type, timestamp); a Spark task per partition and side."""

from __future__ import annotations

import hashlib
import struct
import time
from dataclasses import dataclass

STALL_S = 10.0  # no record nor end of partition for this long: the side is stuck
# One consume() call: librdkafka's returns at BATCH messages or at its timeout, never earlier (a
# partition's end included), so a long one made every partition shorter than BATCH wait it out.
WAIT_S = 0.2
BATCH = 2000
_Q = struct.Struct(">qbqi")


@dataclass(frozen=True)
class DigestTask:
    side: str  # "source" or "dest"
    bootstrap: str
    topic: str
    partition: int
    end: int  # offsets below it


@dataclass(frozen=True)
class Digest:
    side: str
    topic: str
    partition: int
    records: int
    last_offset: int  # -1: none
    sha256: str


def _field(h: hashlib._Hash, b: bytes | str | None) -> None:
    if b is None:
        h.update(b"\xff\xff\xff\xff")
        return
    data = b.encode() if isinstance(b, str) else b
    h.update(len(data).to_bytes(4, "big"))
    h.update(data)


def digest_partition(task: DigestTask) -> Digest:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    chain = hashlib.sha256()
    n, last = 0, -1
    if task.end > 0:
        c = Consumer({"bootstrap.servers": task.bootstrap, "group.id": "quire-migrate-verify",
                      "enable.auto.commit": False, "isolation.level": "read_committed",
                      "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        try:
            c.assign([TopicPartition(task.topic, task.partition, OFFSET_BEGINNING)])
            done = False
            progress = time.monotonic()
            while not done:
                msgs = c.consume(BATCH, WAIT_S)
                if not msgs:
                    if time.monotonic() - progress >= STALL_S:
                        raise TimeoutError(f"{task.side} {task.topic}-{task.partition}: no records for {STALL_S:g} s "
                                           f"at offset {last + 1} (expected up to {task.end})")
                    continue
                progress = time.monotonic()
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() == err._PARTITION_EOF:
                            # this side ends here: if before `end`, it holds fewer records than
                            # the other, which the comparison shows (waiting would only time out)
                            done = True
                            continue
                        raise RuntimeError(f"{task.side} {task.topic}-{task.partition}: {err}")
                    off = m.offset() or 0
                    if off >= task.end:
                        done = True
                        break
                    ts_type, ts = m.timestamp()
                    step = hashlib.sha256(chain.digest())
                    step.update(_Q.pack(off, ts_type, ts, len(m.headers() or ())))
                    _field(step, m.key())
                    _field(step, m.value())
                    for header in m.headers() or ():
                        _field(step, header[0])
                        _field(step, header[1])
                    chain = step
                    n, last = n + 1, off
                    if off + 1 >= task.end:
                        done = True
        finally:
            c.close()
    return Digest(task.side, task.topic, task.partition, n, last, chain.hexdigest())
