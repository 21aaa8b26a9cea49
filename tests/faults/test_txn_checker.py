"""The transactional checker itself: a clean history passes, and each kind of anomaly a broken
log could produce (loss, duplicates, reordering, an aborted or partial transaction read
committed, a committed record read_uncommitted lacks) is counted as such."""

from __future__ import annotations

from tests.faults.txn_checker import Attempt, Fate, OutRecord, check, decode, encode

INPUTS, PARTITIONS = 12, 3


def history() -> tuple[list[Attempt], list[list[OutRecord]], list[list[OutRecord]]]:
    """Attempt 1 commits seqs 0-5, attempt 2 writes 6-11 and aborts, attempt 3 (unknown to the
    application, committed by the coordinator) writes 6-11 again, attempt 4 (unknown, aborted by
    the coordinator) writes nothing visible."""
    attempts = [Attempt(1, Fate.COMMITTED), Attempt(2, Fate.ABORTED), Attempt(3, Fate.UNKNOWN),
                Attempt(4, Fate.UNKNOWN, {0: 1})]
    committed: list[list[OutRecord]] = [[] for _ in range(PARTITIONS)]
    uncommitted: list[list[OutRecord]] = [[] for _ in range(PARTITIONS)]
    offsets = [0] * PARTITIONS

    def write(attempt: Attempt, seqs: range, visible: bool) -> None:
        for s in seqs:
            p = s % PARTITIONS
            r = OutRecord(offsets[p], s, attempt.id)
            offsets[p] += 1
            attempt.produced[p] = attempt.produced.get(p, 0) + 1
            uncommitted[p].append(r)
            if visible:
                committed[p].append(r)
        for p in range(PARTITIONS):
            offsets[p] += 1  # the control batch

    write(attempts[0], range(0, 6), True)
    write(attempts[1], range(6, 12), False)
    write(attempts[2], range(6, 12), True)
    return attempts, committed, uncommitted


def test_clean_history_passes() -> None:
    attempts, committed, uncommitted = history()
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert v.ok, v.examples
    assert (v.committed, v.aborted, v.unknown, v.unknown_visible) == (1, 1, 2, 1)
    assert (v.read_committed, v.read_uncommitted) == (12, 18)


def test_detects_loss() -> None:
    attempts, committed, uncommitted = history()
    del committed[1][0]  # seq 1 of the committed attempt 1
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert not v.ok
    assert (v.lost, v.partial, v.duplicated) == (1, 1, 0), v.examples


def test_detects_loss_of_a_whole_unknown_attempt_never_retried() -> None:
    attempts, committed, uncommitted = history()
    for p in range(PARTITIONS):  # attempt 3 invisible, and nothing wrote seqs 6-11 again
        committed[p] = [r for r in committed[p] if r.attempt != 3]
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert (v.lost, v.partial, v.unknown_visible) == (6, 0, 0), v.examples


def test_detects_duplicates() -> None:
    attempts, committed, uncommitted = history()
    committed[0].append(OutRecord(99, 9, 3))  # seq 9 again, as if attempt 3 wrote it twice
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert not v.ok
    assert v.duplicated == 1 and v.lost == 0, v.examples


def test_detects_reordering() -> None:
    attempts, committed, uncommitted = history()
    a, b = committed[2][0], committed[2][1]  # seqs 2 and 5
    committed[2][0], committed[2][1] = OutRecord(a.offset, b.seq, b.attempt), OutRecord(b.offset, a.seq, a.attempt)
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert not v.ok
    assert v.reordered == 1 and (v.lost, v.duplicated) == (0, 0), v.examples


def test_detects_an_aborted_record_read_committed() -> None:
    attempts, committed, uncommitted = history()
    leak = next(r for r in uncommitted[0] if r.attempt == 2)  # seq 6, aborted
    committed[0].insert(2, leak)
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert not v.ok
    assert v.aborted_leaked == 1, v.examples


def test_detects_a_record_of_an_attempt_never_logged() -> None:
    attempts, committed, uncommitted = history()
    committed[0].append(OutRecord(50, 99 * PARTITIONS, 77))
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert v.misplaced == 1, v.examples  # seq out of range
    committed[0][-1] = OutRecord(50, 0, 77)
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert (v.aborted_leaked, v.duplicated) == (1, 1), v.examples


def test_detects_a_partly_visible_unknown_attempt() -> None:
    attempts, committed, uncommitted = history()
    gone = committed[0].pop()  # seq 9 of attempt 3
    assert gone.attempt == 3
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert (v.partial, v.lost) == (1, 1), v.examples


def test_detects_a_record_in_the_wrong_partition() -> None:
    attempts, committed, uncommitted = history()
    moved = committed[0].pop(0)
    committed[1].insert(0, moved)
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert v.misplaced == 1 and not v.ok, v.examples


def test_detects_committed_records_read_uncommitted_lacks() -> None:
    attempts, committed, uncommitted = history()
    uncommitted[1] = [r for r in uncommitted[1] if r.attempt != 3]
    v = check(INPUTS, PARTITIONS, attempts, committed, uncommitted)
    assert v.uncommitted_missing == 2 and not v.ok, v.examples


def test_values_round_trip() -> None:
    assert decode(7, encode(12, 3, b"pad")) == OutRecord(7, 12, 3)
    assert decode(7, b"garbage") == OutRecord(7, -1, -1)
    assert decode(7, None) == OutRecord(7, -1, -1)
