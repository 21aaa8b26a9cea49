"""quire.realtime.priority: every thread of a server process under SCHED_RR (quire/realtime.py),
the threads started later and a standalone's bookie children too; a priority out of range or
refused by the kernel is one line naming the setting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quire.realtime import apply_realtime
from quire.settings import SettingsError
from store.net import free_port
from tests.gateway.test_standalone_cli import quire, wait_output
from tests.support.gateway import ROOT, StandaloneGateway, _env

T = 30.0


def _rr_allowed() -> bool:
    """Whether this machine lets us put a process under SCHED_RR (root here; CAP_SYS_NICE)."""
    probe = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        os.sched_setscheduler(probe.pid, os.SCHED_RR, os.sched_param(1))
        return True
    except PermissionError:
        return False
    finally:
        probe.communicate(b"", timeout=T)


needs_rr = pytest.mark.skipif(not _rr_allowed(), reason="SCHED_RR refused here (no CAP_SYS_NICE)")


def _policies(pid: int) -> dict[int, tuple[int, int]]:
    """(policy, priority) of each thread of `pid`."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = (os.sched_getscheduler(int(task.name)),
                                   os.sched_getparam(int(task.name)).sched_priority)
        except ProcessLookupError:
            pass  # ended meanwhile
    return out


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def test_zero_leaves_the_process_alone() -> None:
    before = os.sched_getscheduler(0)
    assert apply_realtime(0) is False
    assert os.sched_getscheduler(0) == before == os.SCHED_OTHER


@pytest.mark.parametrize("priority", [-1, 100])
def test_a_priority_out_of_range_names_the_setting(priority: int) -> None:
    with pytest.raises(SettingsError, match=rf"quire.realtime.priority \(--realtime-priority\) {priority}: "
                                            r"must be 0 \(off\) or 1-99"):
        apply_realtime(priority)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_a_refusal_by_the_kernel_names_the_setting_and_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pid: int, policy: int, param: os.sched_param) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with pytest.raises(SettingsError, match=r"quire.realtime.priority \(--realtime-priority\) 1: refused by the "
                                            r"kernel \(needs CAP_SYS_NICE, or an RLIMIT_RTPRIO of at least 1"):
        apply_realtime(1)


@needs_rr
def test_every_thread_now_and_later_runs_under_sched_rr() -> None:
    # In a process of its own: the test runner must not turn real-time itself.
    code = ("import json, os, threading\n"
            "from quire.realtime import apply_realtime\n"
            "early = threading.Thread(target=threading.Event().wait, daemon=True); early.start()\n"
            "assert apply_realtime(2)\n"
            "def policy(t):\n"
            "    try: return [os.sched_getscheduler(t), os.sched_getparam(t).sched_priority]\n"
            "    except ProcessLookupError: return None  # a thread gone from /proc a moment after join()\n"
            "late = []\n"
            "t = threading.Thread(target=lambda: late.append(policy(0))); t.start(); t.join()\n"
            "now = [policy(t) for t in (early.native_id, threading.get_native_id())]\n"
            "print(json.dumps({'now': now, 'late': late}))\n")
    got = subprocess.run([sys.executable, "-P", "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=T)
    assert got.returncode == 0, got.stderr
    rr = [os.SCHED_RR, 2]
    assert json.loads(got.stdout) == {"now": [rr, rr], "late": [rr]}


@needs_rr
def test_a_standalone_runs_its_gateway_and_bookies_under_sched_rr_and_serves(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    gw = StandaloneGateway(tmp_path / "data", bookies=2, log_level="WARNING",
                           extra_args=["--realtime-priority", "1"])
    try:
        gw.start()
        line = next(x for x in wait_output(gw, "ready:").splitlines() if "ready:" in x)
        assert line.endswith(", real-time priority 1"), line
        bookies = _children(gw.pid)
        assert len(bookies) == 2
        for pid in (gw.pid, *bookies):
            threads = _policies(pid)
            assert len(threads) > 1 and set(threads.values()) == {(os.SCHED_RR, 1)}, (pid, threads)

        delivered: list[object] = []
        p = Producer({"bootstrap.servers": gw.bootstrap, "acks": "all"})
        for i in range(10):
            p.produce("rt", value=b"v%d" % i, on_delivery=lambda err, _msg: delivered.append(err))
        assert p.flush(T) == 0 and delivered == [None] * 10
        c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "rt", "auto.offset.reset": "earliest"})
        try:
            c.subscribe(["rt"])
            got: list[bytes] = []
            while len(got) < 10:
                m = c.poll(T)
                assert m is not None and m.error() is None, m and m.error()
                value = m.value()
                assert value is not None
                got.append(value)
        finally:
            c.close()
        assert got == [b"v%d" % i for i in range(10)]
    finally:
        gw.stop()


def test_a_standalone_with_a_bad_priority_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    got = quire("standalone", "--data-dir", str(tmp_path / "data"), "--port", str(free_port()),
                "--realtime-priority", "100")
    assert got.returncode == 2
    (err,) = got.stderr.strip().splitlines()
    assert err == "quire standalone: quire.realtime.priority (--realtime-priority) 100: must be 0 (off) or 1-99"
    assert not (tmp_path / "data").exists()
