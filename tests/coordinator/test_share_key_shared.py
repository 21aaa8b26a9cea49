"""Key-shared mode of a share-partition (coordinator/share/partition.py, Pulsar's Key_Shared) on
a fake clock: records of a key go to one member at a time and in offset order, through
releases, lock expiry, members leaving and a takeover; null keys are one key; keys are known
only for the window's records; and a randomized run checks both rules after every step."""

from __future__ import annotations

import random

from coordinator.share.config import ShareConfig
from coordinator.share.partition import PENDING, AckType, RecordState, SharePartition, rendezvous
from tests.support.clock import FakeClock

ACCEPT, RELEASE, REJECT, RENEW = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW
CFG = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=4, partition_max_record_locks=40,
                  key_shared=True)


class Log:
    """Batches of records with the given keys (None: a null key; absent: a compacted gap)."""

    def __init__(self, keys: list[int | None], batch: int = 3) -> None:
        self.key = dict(enumerate(keys))
        self.batches = [(b, min(b + batch, len(keys)) - 1) for b in range(0, len(keys), batch)]
        self.last = dict(self.batches)
        self.decoded: list[int] = []

    def keys(self, base: int) -> list[tuple[int, int]]:
        self.decoded.append(base)
        return [(o, hash(self.key[o] if self.key[o] is not None else b""))
                for o in range(base, self.last[base] + 1) if o in self.key]


def offsets(runs: list[tuple[int, int, int]]) -> list[int]:
    return [o for f, la, _ in runs for o in range(f, la + 1)]


def make(clock: FakeClock, cfg: ShareConfig = CFG, **kw: object) -> tuple[SharePartition, list[int]]:
    woken: list[int] = []
    sp = SharePartition(0, cfg, clock=clock, on_available=lambda: woken.append(1), **kw)  # type: ignore[arg-type]
    return sp, woken


async def test_a_held_key_goes_to_nobody_else_and_later_records_wait_for_earlier_ones() -> None:
    clock = FakeClock()
    log = Log([1, 2, 1, 3, 2, 1])  # batches 0-2, 3-5
    sp, woken = make(clock)
    # One acquisition may take several records of a key: they are delivered in order.
    assert sp.acquire("a", log.batches[:1], 100, keys=log.keys) == [(0, 2, 1)]
    # b: keys 1 and 2 are a's; key 3 is free.
    assert sp.acquire("b", log.batches, 100, keys=log.keys) == [(3, 3, 1)]
    # a's next acquisition neither: 4 and 5 wait until a finishes 1 and 0, 2 (same member too).
    assert sp.acquire("a", log.batches, 100, keys=log.keys) == []
    sp.acknowledge("a", 1, 1, [ACCEPT])
    assert woken  # a finished record may let its key's next one go
    assert sp.acquire("b", log.batches, 100, keys=log.keys) == [(4, 4, 1)]
    sp.acknowledge("a", 0, 0, [ACCEPT])
    assert sp.acquire("b", log.batches, 100, keys=log.keys) == []  # 2 (key 1) is still a's
    sp.acknowledge("a", 2, 2, [ACCEPT])
    assert sp.acquire("c", log.batches, 100, keys=log.keys) == [(5, 5, 1)]
    # Each batch was decoded once: the window keeps the keys of the records it holds.
    assert sorted(log.decoded) == [0, 3]
    sp.close()


async def test_released_and_expired_records_go_first_to_whoever_comes() -> None:
    clock = FakeClock()
    log = Log([7, 7, 8, 7, 8, 7])
    sp, _ = make(clock)
    assert offsets(sp.acquire("a", log.batches[:1], 100, keys=log.keys)) == [0, 1, 2]
    sp.acknowledge("a", 0, 2, [RELEASE, ACCEPT, RELEASE])
    # 0 and 2 are available again, with 1 done: they come before 3, 4 and 5, to anyone.
    got = sp.acquire("b", log.batches, 100, keys=log.keys)
    assert got == [(0, 0, 2), (2, 2, 2), (3, 5, 1)]
    # b's lock expires: everything returns and goes again in order, to c.
    await clock.advance(1.0)
    assert sp.acquire("c", log.batches, 100, keys=log.keys) == [(0, 0, 3), (2, 2, 3), (3, 5, 2)]
    # A member leaving returns its records at once (whole batches up to max records).
    assert sp.release_member("c")
    assert sp.acquire("d", log.batches, 2, keys=log.keys) == [(0, 0, 4), (2, 2, 4)]
    assert sp.acquire("e", log.batches, 100, keys=log.keys) == []  # 3-5 wait for d's 0 and 2
    sp.close()


async def test_a_renewed_earlier_record_keeps_expired_later_ones_of_its_key_waiting() -> None:
    clock = FakeClock()
    log = Log([1, 1, 2])
    sp, _ = make(clock)
    assert offsets(sp.acquire("a", log.batches, 100, keys=log.keys)) == [0, 1, 2]
    await clock.advance(0.5)
    sp.acknowledge("a", 0, 0, [RENEW])
    await clock.advance(0.6)  # 1 and 2 expired; 0 is still a's
    assert sp.acquire("b", log.batches, 100, keys=log.keys) == [(2, 2, 2)]
    assert sp.acquire("a", log.batches, 100, keys=log.keys) == []  # 1 waits for 0, even for a
    sp.acknowledge("a", 0, 0, [ACCEPT])
    assert sp.acquire("b", log.batches, 100, keys=log.keys) == [(1, 1, 2)]
    sp.close()


async def test_null_keys_are_one_key_and_gaps_have_none() -> None:
    clock = FakeClock()
    log = Log([None, 5, None, 5, None, 6])
    del log.key[4]  # compacted away: the offset is acquired with its neighbours, never waits
    sp, _ = make(clock)
    assert offsets(sp.acquire("a", log.batches[:1], 100, keys=log.keys)) == [0, 1, 2]
    assert offsets(sp.acquire("b", log.batches, 100, keys=log.keys)) == [4, 5]
    sp.acknowledge("a", 0, 2, [ACCEPT])
    assert offsets(sp.acquire("b", log.batches, 100, keys=log.keys)) == [3]
    sp.close()


async def test_a_delayed_record_holds_back_its_key_only() -> None:
    clock = FakeClock()
    log = Log([1, 2, 1, 2])
    later = int(clock.time() * 1000) + 5000
    sp, woken = make(clock)

    def due(base: int) -> list[tuple[int, int, int]]:
        return [(0, 0, later)] if base == 0 else []

    assert offsets(sp.acquire("a", log.batches, 100, due=due, keys=log.keys)) == [1, 3]
    sp.acknowledge("a", 1, 1, [ACCEPT])
    sp.acknowledge("a", 3, 3, [ACCEPT])
    assert sp.acquire("b", log.batches, 100, due=due, keys=log.keys) == []  # 2 waits for 0
    await clock.advance(5.0)
    assert woken and offsets(sp.acquire("b", log.batches, 100, due=due, keys=log.keys)) == [0, 2]
    sp.close()


async def test_a_takeover_redelivers_in_key_order_and_keys_are_known_only_in_the_window() -> None:
    clock = FakeClock()
    log = Log([k % 3 for k in range(30)])
    sp, _ = make(clock)
    assert offsets(sp.acquire("a", log.batches[:2], 100, keys=log.keys)) == list(range(6))
    sp.acknowledge("a", 0, 5, [ACCEPT, RELEASE, ACCEPT, ACCEPT, ACCEPT, ACCEPT])
    assert offsets(sp.acquire("b", log.batches[:4], 100, keys=log.keys)) == list(range(1, 2)) + list(range(6, 12))
    # b holds 1 (count 2) and 6-11; the owner dies. The new one knows no key and nothing is held.
    again = SharePartition(sp.spso, CFG, clock=clock, stored=sp.stored())
    got = again.acquire("c", log.batches, 3, keys=log.keys)
    assert got == [(1, 1, 3), (6, 8, 2)]  # whole batches up to max records, in offset order
    assert again.acquire("d", log.batches, 100, keys=log.keys) == []  # every key is c's now
    again.acknowledge("c", 1, 1, [ACCEPT])
    again.acknowledge("c", 6, 8, [ACCEPT])
    assert offsets(again.acquire("d", log.batches, 100, keys=log.keys)) == list(range(9, 30))
    again.acknowledge("d", 9, 29, [ACCEPT])
    # Everything finished: no key is kept.
    assert (again.spso, len(again._keys)) == (30, 0)
    sp.close()
    again.close()


async def test_the_window_bounds_the_keys_kept() -> None:
    clock = FakeClock()
    cfg = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=4, partition_max_record_locks=6,
                      key_shared=True)
    log = Log([1] * 3 + list(range(100, 200)))  # one key held, then a hundred distinct keys
    sp, _ = make(clock, cfg)
    assert offsets(sp.acquire("a", log.batches[:1], 100, keys=log.keys)) == [0, 1, 2]
    assert offsets(sp.acquire("b", log.batches, 100, keys=log.keys)) == [3, 4, 5]  # the window is full
    assert len(sp._keys) <= cfg.partition_max_record_locks
    sp.acknowledge("a", 0, 2, [ACCEPT])
    sp.acknowledge("b", 3, 5, [ACCEPT])
    assert offsets(sp.acquire("b", log.batches, 100, keys=log.keys)) == [6, 7, 8, 9, 10, 11]
    assert len(sp._keys) <= cfg.partition_max_record_locks
    sp.close()


async def test_keys_spread_over_the_members_fetching_and_move_when_one_stops() -> None:
    clock = FakeClock()
    log = Log([k % 8 for k in range(32)], batch=8)
    sp, _ = make(clock)
    both = ["a", "b"]
    got_a = offsets(sp.acquire("a", log.batches, 100, keys=log.keys, members=both))
    got_b = offsets(sp.acquire("b", log.batches, 100, keys=log.keys, members=both))
    keys_a, keys_b = {log.key[o] for o in got_a}, {log.key[o] for o in got_b}
    # Each takes every record of its own keys (as rendezvous hashing picks them), not the first
    # fetcher all of them.
    assert keys_a == {k for k in range(8) if rendezvous(both, hash(k)) == "a"}
    assert keys_a and keys_b == set(range(8)) - keys_a
    assert sorted(got_a + got_b) == list(range(32))
    # b stops fetching: its keys go to a, but only once b's records are finished.
    sp.acknowledge("a", min(got_a), min(got_a), [ACCEPT])
    assert sp.acquire("a", log.batches, 100, keys=log.keys, members=["a"]) == []
    await clock.advance(1.0)  # the locks expire
    assert offsets(sp.acquire("a", log.batches, 100, keys=log.keys, members=["a"])) == sorted(
        set(range(32)) - {min(got_a)})
    sp.close()


def _pending(sp: SharePartition) -> dict[int, tuple[RecordState, str | None]]:
    return {o: (s.state, s.member) for s in sp.spans() if s.state in PENDING for o in range(s.first, s.last + 1)}


async def test_randomized_members_never_share_a_key_nor_break_its_order() -> None:
    """Members acquire (with keys spread over some of them, or not), accept, release, reject,
    renew, leave and let locks expire at random; after every step no key is held by two members, and every acquisition took a record only
    with every earlier unfinished record of its key."""
    clock = FakeClock()
    rng = random.Random(13)
    cfg = ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=3, partition_max_record_locks=30,
                      key_shared=True)
    log = Log([rng.choice([1, 2, 3, 4, None]) for _ in range(300)], batch=4)
    sp, _ = make(clock, cfg)
    members = ["a", "b", "c", "d"]
    produced = 0
    acquired_any = 0
    for _ in range(3000):
        produced = min(len(log.batches), produced + rng.choice([0, 0, 1]))
        m = rng.choice(members)
        op = rng.random()
        if op < 0.45:
            before, spso, end = _pending(sp), sp.spso, sp.end
            fetching = rng.choice([(), tuple(members), tuple(members[:2])])
            got = offsets(sp.acquire(m, log.batches[:produced], rng.choice([1, 5, 50]), keys=log.keys,
                                     members=fetching))
            acquired_any += len(got)
            taken = set(got)
            for o in got:
                for p in range(spso, o):
                    if log.key.get(p, "gap") == log.key[o] and (p >= end or p in before):
                        assert p in taken, f"{m} got {o} while {p} of its key was unfinished: {before.get(p)}"
        elif op < 0.8:
            held = sorted(o for o, (st, who) in _pending(sp).items() if st is RecordState.ACQUIRED and who == m)
            if held:
                o = rng.choice(held)
                t = rng.choices([ACCEPT, RELEASE, REJECT, RENEW], weights=[8, 2, 1, 1])[0]
                sp.acknowledge(m, o, o, [t])
        elif op < 0.85:
            sp.release_member(m)
        else:
            await clock.advance(rng.choice([0.1, 0.3, 1.0]))
        holders: dict[object, set[str]] = {}
        for o, (st, who) in _pending(sp).items():
            if st is RecordState.ACQUIRED and o in log.key:
                holders.setdefault(log.key[o], set()).add(who or "")
        assert all(len(h) == 1 for h in holders.values()), holders
        assert len(sp._keys) <= sp.end - sp.spso
    # Everything finishes in the end: nothing waits forever.
    await clock.advance(10.0)
    for _ in range(400):
        if sp.spso == 300:
            break
        for f, la, _ in sp.acquire("z", log.batches, 50, keys=log.keys):
            sp.acknowledge("z", f, la, [ACCEPT])
    assert acquired_any > 300 and sp.spso == 300 and sp.spans() == []
    sp.close()
