"""The fault runs' checker: per partition, every acknowledged message is read back exactly once,
at its acknowledged offset and in acknowledged order, with no offset gaps (Jepsen's lost,
duplicated and reordered writes); plus the group's committed offsets never moving backwards
(recorded by the workload's monitor)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from tests.faults.workload import ID_BASE, Acks


@dataclass
class Verdict:
    acked: int = 0
    read: int = 0
    lost: int = 0  # acknowledged, not read back (or read back at another offset)
    duplicated: int = 0  # read back more than once (acknowledged or not)
    reordered: int = 0  # read back out of the producer's order, or acks out of offset order
    gaps: int = 0  # offsets missing between the first and the last read back
    no_offset: int = 0  # acknowledged without an offset (librdkafka: persisted, offset unknown)
    commit_regressions: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.gaps or self.commit_regressions)

    def note(self, msg: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(msg)


def check(acks: list[Acks], read: list[tuple[array[int], array[int]]], commit_regressions: list[str]) -> Verdict:
    v = Verdict()
    for p, (a, (offsets, ids)) in enumerate(zip(acks, read, strict=True)):
        v.acked += len(a.ids)
        v.read += len(ids)
        # Gaps (and offsets read twice) in what the log serves.
        if offsets:
            expected = list(range(offsets[0], offsets[0] + len(offsets)))
            if list(offsets) != expected:
                seen = set(offsets)
                missing = len(set(range(offsets[0], offsets[-1] + 1)) - seen)
                v.gaps += missing
                v.note(f"p{p}: offsets not dense ({missing} missing, {len(offsets) - len(seen)} repeated)")
            if offsets[0] != 0:
                v.gaps += offsets[0]
                v.note(f"p{p}: log starts at {offsets[0]}, not 0")
        at: dict[int, int] = {}
        count: dict[int, int] = {}
        for o, i in zip(offsets, ids, strict=True):
            at.setdefault(i, o)
            count[i] = count.get(i, 0) + 1
        dups = sum(n - 1 for n in count.values() if n > 1)
        if dups:
            v.duplicated += dups
            example = next(i for i, n in count.items() if n > 1)
            v.note(f"p{p}: {dups} duplicates, e.g. id {example} x{count[example]}")
        # Every acknowledged id, once, at its acknowledged offset.
        for o, i in zip(a.offsets, a.ids, strict=True):
            got = at.get(i)
            if o < 0:
                v.no_offset += 1
                if v.no_offset <= 3:
                    v.note(f"p{p}: id {i} acknowledged without an offset, read back at {got}")
            if got is None:
                v.lost += 1
                v.note(f"p{p}: acked id {i} at offset {o} not read back")
            elif got != o and o >= 0:
                v.lost += 1
                v.note(f"p{p}: acked id {i} at offset {o}, read back at {got}")
        # Acknowledgements of one producer arrive in offset order ...
        last_ack: dict[int, int] = {}
        for o, i in zip(a.offsets, a.ids, strict=True):
            prod = i // ID_BASE
            if o < 0:
                continue
            if o <= last_ack.get(prod, -1):
                v.reordered += 1
                v.note(f"p{p}: producer {prod} acked offset {o} after {last_ack[prod]}")
            last_ack[prod] = max(o, last_ack.get(prod, -1))
        # ... and the log holds each producer's messages in its sending order.
        last_seq: dict[int, int] = {}
        for o, i in zip(offsets, ids, strict=True):
            if i < 0:
                continue
            prod, seq = divmod(i, ID_BASE)
            if seq < last_seq.get(prod, -1):
                v.reordered += 1
                v.note(f"p{p}: offset {o}: producer {prod} seq {seq} after seq {last_seq[prod]}")
            last_seq[prod] = max(seq, last_seq.get(prod, -1))
    v.commit_regressions = len(commit_regressions)
    for r in commit_regressions[:5]:
        v.note(f"committed offset moved backwards: {r}")
    return v


def unavailable_seconds(acks: list[Acks], start: float, end: float) -> int:
    """Seconds of [start, end) in which some partition got no acknowledgement at all."""
    if end <= start:
        return 0
    n = int(end - start)
    silent = [False] * n
    for a in acks:
        hit = bytearray(n)
        for t in a.times:
            k = int(t - start)
            if 0 <= k < n:
                hit[k] = 1
        for k in range(n):
            if not hit[k]:
                silent[k] = True
    return sum(silent)
