"""Pure parts: range sets, names, config/rollover decisions, retention, metadata, cursor codec, cache."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.managed.cache import EntryCache
from store.managed.config import LogConfig, should_roll
from store.managed.cursor_codec import (
    CursorState,
    decode_meta,
    decode_state,
    encode_delta,
    encode_meta,
    encode_snapshot_chunks,
    encode_state,
    replay,
    replay_start,
)
from store.managed.errors import CursorStateError
from store.managed.metadata import LedgerInfo, LogMetadata
from store.managed.names import decode_name, encode_name, log_path
from store.managed.position import Position
from store.managed.rangeset import RangeSet
from store.managed.retention import consumed_prefix, select_for_deletion


def _model_ranges(points: set[tuple[int, int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for lid, e in sorted(points):
        if out and out[-1][0] == lid and out[-1][2] == e - 1:
            out[-1] = (lid, out[-1][1], e)
        else:
            out.append((lid, e, e))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 5)), max_size=60),
    st.tuples(st.integers(0, 3), st.integers(-1, 45)),
)
def test_rangeset_matches_a_set_model(adds: list[tuple[int, int, int]], cut: tuple[int, int]) -> None:
    rs = RangeSet()
    model: set[tuple[int, int]] = set()
    for lid, first, n in adds:
        new = {(lid, e) for e in range(first, first + n + 1)}
        assert rs.add(lid, first, first + n) == len(new - model)
        model |= new
    assert rs.ranges() == _model_ranges(model)
    assert rs.count == len(model)
    for lid in range(4):
        for e in range(0, 48):
            assert rs.contains(Position(lid, e)) == ((lid, e) in model)
    removed = rs.remove_upto(Position(*cut))
    kept = {p for p in model if p > cut}
    assert removed == len(model) - len(kept)
    assert rs.ranges() == _model_ranges(kept)
    assert rs.count == len(kept)
    assert rs.count_in_ledger_range(1, 2) == len([p for p in kept if 1 <= p[0] <= 2])


def test_rangeset_merges_adjacent_but_not_across_ledgers() -> None:
    rs = RangeSet()
    rs.add(1, 9, 9)
    rs.add(2, 0, 0)
    rs.add(1, 10, 10)
    assert rs.ranges() == [(1, 9, 10), (2, 0, 0)]
    assert rs.first() == (1, 9, 10)
    with pytest.raises(ValueError):
        rs.add(1, 5, 4)


@pytest.mark.parametrize("name", ["a", "topic/part-0", ".", "..", "a.b", "%41", "ünï/cödé", "x" * 200])
def test_names_round_trip_to_one_safe_segment(name: str) -> None:
    seg = encode_name(name)
    assert "/" not in seg and seg not in (".", "..") and "." not in seg
    assert decode_name(seg) == name
    assert log_path(name) == "/managed/" + seg
    with pytest.raises(ValueError):
        encode_name("")


def test_should_roll_by_count_size_age_and_min_age() -> None:
    cfg = LogConfig(max_entries=10, max_bytes=1000, max_age_s=60, min_age_s=0)
    assert not should_roll(cfg, 9, 999, 59)
    assert should_roll(cfg, 10, 0, 0)
    assert should_roll(cfg, 1, 1000, 0)
    assert should_roll(cfg, 1, 1, 60)
    assert not should_roll(cfg, 0, 0, 3600)  # never roll an empty ledger
    cfg2 = LogConfig(max_entries=10, min_age_s=5)
    assert not should_roll(cfg2, 100, 0, 4.9)
    assert should_roll(cfg2, 100, 0, 5)
    with pytest.raises(ValueError):
        LogConfig(ensemble_size=2, write_quorum=3)
    assert LogConfig.from_dict(cfg.to_dict() | {"unknown": 1}) == cfg


def _infos(*specs: tuple[int, int, int, int]) -> list[LedgerInfo]:
    return [LedgerInfo(lid, entries=n, size=size, last_ms=ms, closed=True) for lid, n, size, ms in specs]


def test_consumed_prefix_respects_the_slowest_cursor() -> None:
    ledgers = [*_infos((1, 10, 100, 0), (2, 10, 100, 0), (3, 10, 100, 0)), LedgerInfo(4)]
    assert [li.ledger_id for li in consumed_prefix(ledgers, None)] == [1, 2, 3]
    assert [li.ledger_id for li in consumed_prefix(ledgers, Position(2, 8))] == [1]
    assert [li.ledger_id for li in consumed_prefix(ledgers, Position(2, 9))] == [1, 2]
    assert [li.ledger_id for li in consumed_prefix(ledgers, Position(1, -1))] == []
    assert [li.ledger_id for li in consumed_prefix(ledgers, Position(9, 0))] == [1, 2, 3]  # never the current


def test_retention_by_time_and_size() -> None:
    consumed = _infos((1, 1, 100, 1000), (2, 1, 100, 2000), (3, 1, 100, 3000))
    now = 10_000
    keep_all = LogConfig(retention_ms=-1, retention_bytes=-1)
    assert select_for_deletion(consumed, 400, keep_all, now) == []
    assert select_for_deletion(consumed, 400, LogConfig(retention_ms=0), now) == [1, 2, 3]
    assert select_for_deletion(consumed, 400, LogConfig(retention_ms=7500, retention_bytes=-1), now) == [1, 2]
    # Size: keep at least 250 bytes of the 400 in the log.
    assert select_for_deletion(consumed, 400, LogConfig(retention_ms=-1, retention_bytes=250), now) == [1]
    assert select_for_deletion(consumed, 400, LogConfig(retention_ms=-1, retention_bytes=100), now) == [
        1,
        2,
        3,
    ]


def test_log_metadata_round_trip() -> None:
    md = LogMetadata(
        ledgers=[LedgerInfo(5, 10, 1000, 1, 2, {"first": "0"}, True), LedgerInfo(9)],
        props={"k": "v"},
        config=LogConfig(max_entries=7),
        start=Position(5, 3),
    )
    back = LogMetadata.from_bytes(md.to_bytes(), 4)
    assert back.ledgers == md.ledgers and back.props == md.props and back.config == md.config
    assert back.start == Position(5, 3) and back.version == 4
    assert LogMetadata.from_bytes(b"").ledgers == []


def _random_state(rng: random.Random, n: int) -> CursorState:
    rs = RangeSet()
    for _ in range(n):
        lid = rng.randrange(1, 5)
        f = rng.randrange(0, 10_000)
        rs.add(lid, f, f + rng.randrange(0, 3))
    rs.remove_upto(Position(1, 50))
    return CursorState(Position(1, 50), rs, {"a": "1", "ü": "x" * 10})


def test_state_meta_and_snapshot_chunks_round_trip() -> None:
    rng = random.Random(1)
    state = _random_state(rng, 3000)
    assert decode_state(encode_state(state)) == state
    lid, complete, back = decode_meta(encode_meta(77, state, 100_000))
    assert (lid, complete, back) == (77, True, state)
    lid, complete, back = decode_meta(encode_meta(-1, state, 10))
    assert not complete and len(back.acked) == 10
    chunks = encode_snapshot_chunks(-1, encode_state(state), 1000)
    assert len(chunks) > 5
    assert replay(chunks, 0) == state
    with pytest.raises(CursorStateError):
        decode_meta(b"\x01")


def test_replay_deltas_and_an_incomplete_trailing_snapshot() -> None:
    base = CursorState(Position(1, 4))
    entries = encode_snapshot_chunks(-1, encode_state(base), 1000)  # entry 0
    entries.append(encode_delta(0, Position(1, 4), [(1, 6, 6), (1, 8, 9)], {"p": "1"}))
    entries.append(encode_delta(0, Position(1, 6), [(1, 5, 5)], {"p": None, "q": "2"}))
    expect = CursorState(Position(1, 6), RangeSet([(1, 8, 9)]), {"q": "2"})
    assert replay_start(entries[-1], len(entries) - 1) == (0, 2)
    assert replay(entries, 0) == expect
    # A snapshot cut short by a crash (chunk 0 of 2): replay what came before it.
    big = encode_snapshot_chunks(0, encode_state(expect) + b"", 10)
    entries.append(big[0])
    first, end = replay_start(entries[-1], len(entries) - 1)
    assert (first, end) == (0, 2)
    assert replay(entries[first : end + 1], first) == expect


def test_cache_bounded_by_bytes_evicts_oldest() -> None:
    c = EntryCache(max_bytes=10 * (100 + 64))
    t = c.new_token()
    for i in range(20):
        c.insert(t, 1, i, bytes(100))
    assert c.size <= c.max_bytes and len(c) == 10
    assert c.get(t, 1, 9) is None and c.get(t, 1, 10) == bytes(100)
    assert len(c.get_range(t, 1, 10, 19, 1 << 30)) == 10
    assert len(c.get_range(t, 1, 10, 19, 250)) == 3  # stops once the byte budget is reached
    assert c.get_range(t, 1, 5, 19, 1 << 30) == []
    t2 = c.new_token()
    c.insert(t2, 1, 0, b"x")
    c.invalidate(t)
    assert len(c) == 1 and c.get(t2, 1, 0) == b"x"
    c.insert(t2, 1, 1, bytes(10_000))  # larger than the whole budget: not cached
    assert c.get(t2, 1, 1) is None


def test_cache_per_ledger_invalidation_and_bounded_bookkeeping() -> None:
    c = EntryCache(max_bytes=100 * (10 + 64))
    t1, t2 = c.new_token(), c.new_token()
    for i in range(1000):
        c.insert(t1, i // 100, i % 100, bytes(10))
        c.insert(t2, 1, i, bytes(10))
    assert len(c) == 100
    assert sum(len(d) for d in c._by_token.values()) <= 102  # evicted keys leave the per-log index
    c.insert(t1, 9, 99, b"y" * 10)  # re-insert of a cached key
    c.invalidate(t1, ledger_id=9)
    assert c.get(t1, 9, 99) is None and c.get(t2, 1, 999) == bytes(10)
    size = c.size
    c.invalidate(t2)
    assert len(c) == 0 and c.size == 0 < size
