"""Pure logic: striping, quorum coverage, placement, metadata serialisation."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping

import pytest

from store.ledger.body import length_prefix, unwrap
from store.ledger.errors import NotEnoughBookiesError
from store.ledger.metadata import CLOSED, OPEN, LedgerMetadata
from store.ledger.placement import BookieInfo, RackAwarePlacement, RandomPlacement, min_racks_per_write_quorum
from store.ledger.quorum import is_covered, missing_for_absence, write_set


def test_round_robin_striping() -> None:
    assert [write_set(e, 3, 2) for e in range(4)] == [[0, 1], [1, 2], [2, 0], [0, 1]]
    assert write_set(7, 5, 3) == [2, 3, 4]
    assert write_set(4, 5, 3) == [4, 0, 1]
    assert all(sorted(write_set(e, 3, 3)) == [0, 1, 2] for e in range(10))


def _brute_covered(e: int, wq: int, aq: int, answered: set[int]) -> bool:
    # No write quorum may still hold AQ bookies that did not answer.
    for s in range(e):
        quorum = set(write_set(s, e, wq))
        if len(quorum - answered) >= aq:
            return False
    return True


@pytest.mark.parametrize(
    ("e", "wq", "aq"), [(3, 3, 2), (3, 2, 2), (5, 3, 2), (4, 2, 1), (3, 3, 3), (5, 5, 3)]
)
def test_coverage_matches_definition(e: int, wq: int, aq: int) -> None:
    for k in range(e + 1):
        for answered in itertools.combinations(range(e), k):
            assert is_covered(e, wq, aq, set(answered)) == _brute_covered(e, wq, aq, set(answered))


def test_coverage_examples() -> None:
    # E=WQ=3, AQ=2: any two fenced bookies stop the writer; one does not.
    assert not is_covered(3, 3, 2, {0})
    assert is_covered(3, 3, 2, {0, 2})
    # AQ=WQ: one answer per write quorum is enough.
    assert is_covered(3, 3, 3, {1})
    # E=5, WQ=3, AQ=2: two unknown bookies always share a write quorum of three.
    assert not is_covered(5, 3, 2, {0, 1, 2})
    assert not is_covered(5, 3, 2, {0, 1, 3})
    assert is_covered(5, 3, 2, {0, 1, 2, 3})
    assert is_covered(5, 3, 2, {0, 2, 3, 4}) and not is_covered(5, 3, 2, {0, 2})
    assert missing_for_absence(3, 2) == 2 and missing_for_absence(3, 3) == 1


def _bookies(racks: Mapping[str, str | None]) -> list[BookieInfo]:
    return [BookieInfo(a, r) for a, r in racks.items()]


def test_random_placement_and_not_enough() -> None:
    bookies = _bookies({f"b{i}:1": None for i in range(4)})
    p = RandomPlacement(random.Random(1))
    ens = p.new_ensemble(3, 2, bookies)
    assert len(set(ens)) == 3 and set(ens) <= {b.address for b in bookies}
    with pytest.raises(NotEnoughBookiesError, match=r"need 3 bookies but only 2"):
        p.new_ensemble(3, 2, bookies, exclude={"b0:1", "b1:1"})
    r = p.replace_bookie(ens, 1, 2, bookies)
    assert r not in ens
    with pytest.raises(NotEnoughBookiesError):
        p.replace_bookie(["b0:1", "b1:1", "b2:1"], 0, 2, bookies, exclude={"b3:1"})


def test_rack_aware_spreads_over_racks() -> None:
    bookies = _bookies({"a1:1": "A", "a2:1": "A", "a3:1": "A", "b1:1": "B", "c1:1": "C", "c2:1": "C"})
    rack = {b.address: b.rack for b in bookies}
    for seed in range(30):
        p = RackAwarePlacement(random.Random(seed))
        ens = p.new_ensemble(3, 2, bookies)
        assert {rack[a] for a in ens} == {"A", "B", "C"}
        ens4 = p.new_ensemble(4, 2, bookies)
        racks4 = [rack[a] or "" for a in ens4]
        assert set(racks4) == {"A", "B", "C"}
        # Every write quorum of two spans two racks when an ordering allows it.
        assert min_racks_per_write_quorum(racks4, 2) == 2


def test_rack_aware_two_racks_each_write_quorum_spans_both() -> None:
    bookies = _bookies({f"a{i}:1": "A" for i in range(3)} | {f"b{i}:1": "B" for i in range(3)})
    rack = {b.address: b.rack for b in bookies}
    for seed in range(20):
        ens = RackAwarePlacement(random.Random(seed)).new_ensemble(4, 2, bookies)
        assert min_racks_per_write_quorum([rack[a] or "" for a in ens], 2) == 2


def test_rack_aware_replacement_prefers_missing_rack() -> None:
    bookies = _bookies({"a1:1": "A", "a2:1": "A", "b1:1": "B", "b2:1": "B", "c1:1": "C", "c2:1": "C"})
    for seed in range(20):
        p = RackAwarePlacement(random.Random(seed))
        # c1 (rack C) failed at index 2: the replacement must come from rack C again.
        assert p.replace_bookie(["a1:1", "b1:1", "c1:1"], 2, 3, bookies, exclude={"c1:1"}) == "c2:1"


def test_rack_aware_without_racks_is_random_and_fails_clearly() -> None:
    bookies = _bookies({f"b{i}:1": None for i in range(3)})
    ens = RackAwarePlacement(random.Random(3)).new_ensemble(3, 3, bookies)
    assert sorted(ens) == ["b0:1", "b1:1", "b2:1"]
    with pytest.raises(NotEnoughBookiesError, match=r"need 5 bookies but only 3 live bookies"):
        RackAwarePlacement().new_ensemble(5, 3, bookies)


def _md(**kw: object) -> LedgerMetadata:
    base: dict[str, object] = dict(
        ledger_id=42,
        state=OPEN,
        ensemble_size=3,
        write_quorum=3,
        ack_quorum=2,
        ensembles=[(0, ["a:1", "b:1", "c:1"])],
        properties={"log": "t-0"},
        ctime_ms=1234,
    )
    base.update(kw)
    return LedgerMetadata(**base)  # type: ignore[arg-type]


def test_metadata_round_trip_and_fragments() -> None:
    md = _md()
    md2 = md.with_ensemble(10, ["a:1", "d:1", "c:1"]).with_ensemble(25, ["e:1", "d:1", "c:1"])
    closed = md2.copy(state=CLOSED, last_entry_id=30, length=999)
    back = LedgerMetadata.from_bytes(closed.to_bytes(), version=7)
    assert back == closed and back.version == 7
    assert back.ensemble_for(0) == ["a:1", "b:1", "c:1"]
    assert back.ensemble_for(9) == ["a:1", "b:1", "c:1"]
    assert back.ensemble_for(10) == ["a:1", "d:1", "c:1"]
    assert back.ensemble_for(1000) == ["e:1", "d:1", "c:1"]
    assert back.fragment_end(0) == 9 and back.fragment_end(2) is None
    assert back.bookies() == {"a:1", "b:1", "c:1", "d:1", "e:1"}
    # The original is untouched by the copies.
    assert md.ensembles == [(0, ["a:1", "b:1", "c:1"])]
    # A new fragment at the same start replaces the last one (it held no acked entry).
    assert md2.with_ensemble(25, ["f:1", "d:1", "c:1"]).ensembles[-1] == (25, ["f:1", "d:1", "c:1"])
    with pytest.raises(ValueError):
        md2.with_ensemble(5, ["a:1", "b:1", "c:1"])


def test_metadata_rejects_bad_quorums() -> None:
    with pytest.raises(ValueError):
        _md(write_quorum=2, ack_quorum=3)
    with pytest.raises(ValueError):
        _md(ensembles=[(0, ["a:1", "b:1"])])
    with pytest.raises(ValueError):
        _md(state="weird")


def test_body_length_prefix() -> None:
    body = length_prefix(123456789) + b"payload"
    length, payload = unwrap(memoryview(body))
    assert length == 123456789 and bytes(payload) == b"payload"
    with pytest.raises(ValueError):
        unwrap(memoryview(b"abc"))
