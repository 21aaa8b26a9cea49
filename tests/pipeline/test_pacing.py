"""pipeline.pacing: a scan task's fixed rate bound (Pace) and its CPU headroom (Headroom), on a
fake clock and a fake /proc/stat."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import pacing
from pipeline.pacing import Headroom, Pace, cpu_sample, executor_cpu, machine_cpu


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


def fake_proc(root: Path, procs: dict[int, tuple[str, int, int, int, list[int]]]) -> None:
    """/proc/PID/stat (name, parent, utime + stime, cutime + cstime; each split in two) and
    /proc/PID/task/PID/children for each process."""
    for pid, (name, ppid, ticks, reaped, children) in procs.items():
        d = root / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True)
        before = " ".join(["S", str(ppid)] + ["0"] * 9)
        (d / "stat").write_text(f"{pid} ({name}) {before} {ticks - ticks // 2} {ticks // 2} {reaped - reaped // 2} "
                                f"{reaped // 2} 20 0 1 0 1\n")
        (d / "task" / str(pid) / "children").write_text(" ".join(map(str, children)))


def test_executor_cpu_sums_the_jvm_the_daemon_and_its_workers(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pacing, "PROC", str(tmp_path))
    fake_proc(tmp_path, {
        1: ("systemd", 0, 1_000_000, 0, [10]),
        10: ("java", 1, 500, 40, [20, 30]),  # the executor: its threads' ticks, and its reaped children's
        20: ("python3", 10, 7, 300, [21, 22]),  # the daemon (workers gone: 300)
        21: ("python3", 20, 50, 0, []),  # this worker
        22: ("python3", 20, 60, 0, []),  # another
        30: ("python3", 10, 1000, 0, [31]),  # another daemon (planning), not counted
        31: ("python3", 30, 1000, 0, []),
        40: ("python3", 1, 9, 0, []),  # not under Spark
        50: ("weird) (name", 10, 5, 0, []),  # a worker forked straight from the JVM, its name odd
    })
    assert executor_cpu(21) == 500 + 40 + 7 + 300 + 50 + 60
    assert executor_cpu(50) == 500 + 40 + 5
    assert executor_cpu(40) is None
    assert executor_cpu(99) is None


def test_cpu_sample_counts_the_machine_and_this_executor(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 20 3 2 40 0 0\n")
    monkeypatch.setattr(pacing, "STAT", str(stat))
    monkeypatch.setattr(pacing, "PROC", str(tmp_path / "proc"))  # no such process: not under Spark
    assert cpu_sample() == (160, 980, 0)
    monkeypatch.setattr(pacing, "executor_cpu", lambda: 120)
    assert cpu_sample() == (160, 980, 120)


def test_headroom_moves_the_rate_in_proportion_to_how_far_the_machine_is_from_the_cap() -> None:
    room = Headroom(0.15, sample=lambda: (0, 0, 0))
    assert room.adjust(0.80, 0.5, 50e6) is None  # under the cap of 85%: unbounded stays unbounded
    cut = room.adjust(0.90, 0.5, 50e6)
    assert cut == pytest.approx(50e6 * (1 - 3 * 0.05))  # 5 points over: cut by 15% of what it read
    room.rate = cut
    assert room.adjust(0.95, 0.5, 60e6) == pytest.approx(cut * 0.7)  # 10 over: by 30%, of its own rate
    assert room.adjust(0.95, 0.5, 10e6) == pytest.approx(7e6)  # or of what it read, if lower
    assert room.adjust(1.00, 0.5, 60e6) == pytest.approx(cut * 0.55)
    wide = Headroom(0.5, sample=lambda: (0, 0, 0))
    assert wide.adjust(1.00, 0.5, 60e6) == pytest.approx(60e6 * Headroom.CUT)  # far over: halved at most
    assert room.adjust(0.85, 0.5, 60e6) == pytest.approx(cut)  # at the cap: held
    assert room.adjust(0.80, 0.5, 60e6) == pytest.approx(cut * 1.05)  # 5 under: grows by 5%
    assert room.adjust(0.10, 0.05, 60e6) == pytest.approx(cut * Headroom.GROW)  # far under: by a quarter
    room.rate = 1.1e6
    assert room.adjust(0.99, 0.5, 1e6) == Headroom.FLOOR  # always some progress
    room.rate = Headroom.CEILING / 1.1
    assert room.adjust(0.50, 0.4, 1e6) is None  # grown past the ceiling: unbounded again


def test_headroom_leaves_a_machine_busy_only_with_its_own_scan_alone() -> None:
    """Other work under Headroom.OTHERS of the machine (the bookies serving the scan, say): the
    scan's own use keeps the machine busy, and no one is there to leave the CPU to."""
    room = Headroom(0.15, sample=lambda: (0, 0, 0))
    assert room.adjust(0.99, 0.2, 50e6) is None  # not cut
    room.rate = 10e6
    assert room.adjust(0.99, 0.2, 10e6) == pytest.approx(10e6 * Headroom.GROW)  # grown back at the most
    assert room.adjust(0.99, Headroom.OTHERS, 10e6) == pytest.approx(10e6 * 0.58)  # others came: cut


def test_headroom_paces_reads_only_once_a_look_found_the_machine_too_busy(
        clock: tuple[list[float], list[float]]) -> None:
    now, slept = clock
    # busy 95% (5% of it this executor's), then 0%, then 100% (all of it others')
    samples = iter([(0, 0, 0), (95, 100, 5), (95, 200, 5), (295, 400, 5)])

    async def go() -> Headroom:
        room = Headroom(0.15, interval=1.0, sample=lambda: next(samples))
        await room.read(1000)  # no look yet: unbounded
        assert slept == []
        now[0] += 1.0
        await room.read(1000)  # a look: 95% busy, 2000 B/s read -> 1400 B/s,
        assert room.rate == pytest.approx(Headroom.FLOOR)  # cut, to the floor
        assert slept and slept[-1] == pytest.approx(1000 / Headroom.FLOOR)
        now[0] += 1.0
        await room.read(1000)  # a look: idle -> grows by a quarter
        assert room.rate == pytest.approx(Headroom.FLOOR * Headroom.GROW)
        now[0] += 1.0
        await room.read(1000)  # 100% busy: cut to 0.55 of the 1000 B/s read, so to the floor
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
