"""Round-robin striping and the quorum arithmetic of writes, fencing and recovery reads."""

from __future__ import annotations

from collections.abc import Collection


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble indexes that store entry `entry_id`: WQ of them starting at entry_id mod E."""
    start = entry_id % ensemble_size
    return [(start + i) % ensemble_size for i in range(write_quorum)]


def is_covered(ensemble_size: int, write_quorum: int, ack_quorum: int, answered: Collection[int]) -> bool:
    """BookKeeper's RRQuorumCoverageSet: True once, in every write quorum, fewer than AQ
    bookies are still unknown. Then no ack quorum can be completed without one of the
    bookies that answered (and, for fencing, refuses the old writer from now on)."""
    for start in range(ensemble_size):
        unknown = sum(1 for i in range(write_quorum) if (start + i) % ensemble_size not in answered)
        if unknown >= ack_quorum:
            return False
    return True


def missing_for_absence(write_quorum: int, ack_quorum: int) -> int:
    """How many bookies of an entry's write set must deny having it before recovery may
    conclude it was never acknowledged (it cannot have reached AQ of them)."""
    return write_quorum - ack_quorum + 1
