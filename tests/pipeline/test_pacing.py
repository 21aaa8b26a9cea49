"""pipeline.pacing: a scan task's fixed rate bound (Pace) and its CPU headroom (Headroom), on a
fake clock and a fake /proc/stat."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import pacing
from pipeline.pacing import Headroom, Pace, machine_cpu


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[float], list[float]]]:
    """(now, slept): a monotonic clock that only sleeps move, and the sleeps asked for."""
    now = [100.0]
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    monkeypatch.setattr(pacing.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(pacing.asyncio, "sleep", sleep)
    yield now, slept


def test_pace_waits_until_the_bytes_read_are_due(clock: tuple[list[float], list[float]]) -> None:
    now, slept = clock

    async def go() -> None:
        pace = Pace(1000)
        await pace.read(500)  # due at +0.5 s
        now[0] += 0.2  # decoding took 0.2 s
        await pace.read(500)  # due at +1.0 s
        now[0] += 3.0  # Spark was slow: nothing to wait for
        await pace.read(1000)

    asyncio.run(go())
    assert slept == pytest.approx([0.5, 0.3])


def test_machine_cpu_reads_proc_stat_without_the_hosts_stealing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    #                 user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 5 50 800 20 3 2 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    monkeypatch.setattr(pacing, "STAT", str(stat))
    assert machine_cpu() == (160, 980)
    monkeypatch.setattr(pacing, "STAT", str(tmp_path / "none"))
    assert machine_cpu() is None


def test_headroom_cuts_the_rate_while_the_machine_is_too_busy_and_lifts_it_after() -> None:
    room = Headroom(0.15, sample=lambda: (0, 0))
    assert room.adjust(0.80, 50e6) is None  # under the cap of 85%: unbounded stays unbounded
    cut = room.adjust(0.95, 50e6)
    assert cut == pytest.approx(35e6)  # over: 0.7 of what it read
    room.rate = cut
    assert room.adjust(0.95, 60e6) == pytest.approx(0.7 * 35e6)  # never above the rate it had
    assert room.adjust(0.95, 10e6) == pytest.approx(7e6)  # nor above what it read
    room.rate = 1.1e6
    assert room.adjust(0.99, 1e6) == Headroom.FLOOR  # always some progress
    assert room.adjust(0.50, 1e6) == pytest.approx(1.1e6 + Headroom.STEP)  # grows a step a look
    room.rate = Headroom.CEILING - Headroom.STEP / 2
    assert room.adjust(0.50, 1e6) is None  # grown past the ceiling: unbounded again


def test_headroom_paces_reads_only_once_a_look_found_the_machine_too_busy(
        clock: tuple[list[float], list[float]]) -> None:
    now, slept = clock
    samples = iter([(0, 0), (95, 100), (95, 200), (295, 400)])  # busy 95%, then 0%, then 100%

    async def go() -> Headroom:
        room = Headroom(0.15, interval=1.0, sample=lambda: next(samples))
        await room.read(1000)  # no look yet: unbounded
        assert slept == []
        now[0] += 1.0
        await room.read(1000)  # a look: 95% busy, 2000 B/s read -> 1400 B/s,
        assert room.rate == pytest.approx(Headroom.FLOOR)  # cut, to the floor
        assert slept and slept[-1] == pytest.approx(1000 / Headroom.FLOOR)
        now[0] += 1.0
        await room.read(1000)  # a look: idle -> grows a step
        assert room.rate == pytest.approx(Headroom.FLOOR + Headroom.STEP)
        now[0] += 1.0
        await room.read(1000)  # 100% busy: cut again, to 0.7 of the 1000 B/s read, so to the floor
        assert room.rate == pytest.approx(Headroom.FLOOR)
        return room

    asyncio.run(go())


def test_shared_headroom_carries_the_rate_to_the_next_slice_with_a_fresh_pace(
        clock: tuple[list[float], list[float]]) -> None:
    now, slept = clock
    first = Headroom.shared(0.3)
    try:
        first.rate = 4e6
        now[0] += 60.0  # the worker idle between slices: its old pace would let a new slice burst
        second = Headroom.shared(0.3)
        assert second is first and second.rate == 4e6
        assert Headroom.shared(0.4) is not first
        asyncio.run(second.read(2_000_000))
        assert slept == pytest.approx([0.5])  # paced from the slice's start, at the learnt rate
    finally:
        Headroom._shared.clear()
