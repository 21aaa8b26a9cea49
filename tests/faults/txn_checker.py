"""The transactional checker: what a consume-transform-produce loop wrote, against what readers of
its output see.

The loop reads input records numbered 0..n-1 (record `seq` in input partition `seq % partitions`)
and writes, per transaction attempt, one output record per input record to the same partition
number, its value naming the input `seq` and the attempt (see `encode`/`decode`). The loop logs
each attempt's fate as the application saw it:

- COMMITTED: `commit_transaction` returned;
- ABORTED: the application never asked for a commit (it aborted, or gave the producer up before
  committing): no record of it may ever become visible to read_committed;
- UNKNOWN: a commit was asked for but not confirmed (the producer failed meanwhile): the
  coordinator decides, all or nothing.

Verdict, from a read_committed and a read_uncommitted read of every output partition from its
start to its end:

- read_committed sees every input seq exactly once (`lost`, `duplicated`), in its partition, in
  increasing order per partition (`reordered`, `misplaced`), never a record of an ABORTED
  attempt (`aborted_leaked`), and each attempt all or nothing (`partial`);
- read_uncommitted sees every record read_committed sees, at the same offset (`uncommitted_missing`),
  plus possibly aborted ones.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field


class Fate(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@dataclass
class Attempt:
    """One transaction attempt of the loop: how many records it produced per output partition."""

    id: int
    fate: Fate
    produced: dict[int, int] = field(default_factory=dict)  # output partition -> records
    how: str = ""  # what ended it, for the report (e.g. the error that led to an abort)


@dataclass(frozen=True)
class OutRecord:
    offset: int
    seq: int
    attempt: int


def encode(seq: int, attempt: int, pad: bytes = b"") -> bytes:
    """An output value: the input seq and the transaction attempt that wrote it."""
    return b"%d|%d|%s" % (seq, attempt, pad)


def decode(offset: int, value: bytes | None) -> OutRecord:
    """An output record read back (seq and attempt -1 when the value is not one of ours)."""
    try:
        seq, attempt, _ = (value or b"").split(b"|", 2)
        return OutRecord(offset, int(seq), int(attempt))
    except ValueError:
        return OutRecord(offset, -1, -1)


@dataclass
class TxnVerdict:
    inputs: int = 0
    attempts: int = 0
    committed: int = 0  # attempts
    aborted: int = 0
    unknown: int = 0
    unknown_visible: int = 0  # UNKNOWN attempts the coordinator committed
    read_committed: int = 0  # records
    read_uncommitted: int = 0
    lost: int = 0  # input seqs read_committed never shows
    duplicated: int = 0  # input seqs read_committed shows more than once
    reordered: int = 0  # read_committed records out of seq order in their partition
    misplaced: int = 0  # read_committed records in another partition than their input's, or not ours
    aborted_leaked: int = 0  # read_committed records of ABORTED attempts (or of attempts never logged)
    partial: int = 0  # attempts read_committed shows in part
    uncommitted_missing: int = 0  # read_committed records read_uncommitted lacks at that offset
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.misplaced or self.aborted_leaked
                    or self.partial or self.uncommitted_missing)

    def note(self, msg: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(msg)

    def summary(self) -> str:
        return (f"inputs {self.inputs}; attempts {self.attempts}: committed {self.committed}, aborted "
                f"{self.aborted}, unknown {self.unknown} (of which committed {self.unknown_visible}); read "
                f"committed {self.read_committed}, uncommitted {self.read_uncommitted}; lost {self.lost}, "
                f"duplicated {self.duplicated}, reordered {self.reordered}, misplaced {self.misplaced}, "
                f"aborted leaked {self.aborted_leaked}, partial {self.partial}, missing from read_uncommitted "
                f"{self.uncommitted_missing}")


def check(inputs: int, partitions: int, attempts: Sequence[Attempt],
          committed: Sequence[Sequence[OutRecord]], uncommitted: Sequence[Sequence[OutRecord]]) -> TxnVerdict:
    """Check the readers' views (per output partition, in offset order) against the loop's log."""
    v = TxnVerdict(inputs=inputs, attempts=len(attempts))
    by_id = {a.id: a for a in attempts}
    for a in attempts:
        v.committed += a.fate is Fate.COMMITTED
        v.aborted += a.fate is Fate.ABORTED
        v.unknown += a.fate is Fate.UNKNOWN
    seen = bytearray(inputs)  # times each seq was read committed (saturating)
    shown: dict[tuple[int, int], int] = {}  # (attempt, partition) -> records read committed
    for p, records in enumerate(committed):
        v.read_committed += len(records)
        last = -1
        for r in records:
            if r.seq < 0 or r.seq >= inputs or r.seq % partitions != p:
                v.misplaced += 1
                v.note(f"p{p} offset {r.offset}: seq {r.seq} (attempt {r.attempt}) does not belong here")
                continue
            if seen[r.seq] < 255:
                seen[r.seq] += 1
            if r.seq <= last:
                v.reordered += 1
                v.note(f"p{p} offset {r.offset}: seq {r.seq} after seq {last}")
            last = max(last, r.seq)
            writer = by_id.get(r.attempt)
            if writer is None or writer.fate is Fate.ABORTED:
                v.aborted_leaked += 1
                v.note(f"p{p} offset {r.offset}: seq {r.seq} of "
                       f"{'unlogged' if writer is None else 'aborted'} attempt {r.attempt} read committed"
                       + (f" ({writer.how})" if writer is not None and writer.how else ""))
                continue
            shown[(writer.id, p)] = shown.get((writer.id, p), 0) + 1
    for seq, n in enumerate(seen):
        if n == 0:
            v.lost += 1
            v.note(f"seq {seq} never read committed")
        elif n > 1:
            v.duplicated += n - 1
            v.note(f"seq {seq} read committed {n} times")
    for a in attempts:
        if a.fate is Fate.ABORTED:
            continue
        got = {p: shown.get((a.id, p), 0) for p in a.produced}
        visible = any(got.values())
        if a.fate is Fate.UNKNOWN:
            v.unknown_visible += visible
        # A committed attempt is whole; an unknown one whole or absent.
        if (a.fate is Fate.COMMITTED or visible) and got != a.produced:
            v.partial += 1
            v.note(f"attempt {a.id} ({a.fate.value}): produced {a.produced}, read committed {got}")
    for p, (records, raw) in enumerate(zip(committed, uncommitted, strict=True)):
        v.read_uncommitted += len(raw)
        at = {r.offset: r for r in raw}
        for r in records:
            if at.get(r.offset) != r:
                v.uncommitted_missing += 1
                v.note(f"p{p} offset {r.offset}: seq {r.seq} read committed, read uncommitted "
                       f"{at.get(r.offset)}")
    return v
