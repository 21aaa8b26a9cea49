"""How late a Python event loop's thread runs when another thread of its process, at a lower CPU
priority, takes the GIL between short syscalls, with every CPU busy: the case of a bookie
whose background read threads (store/bookie/background_reads.py) send a scan's ranges while
its loop takes adds.

Each case runs in a process of its own: a main thread that sleeps 1 ms, then does about 0.1 ms
of Python work, again and again (a loop serving adds), recording how late each round ends; a
helper thread writing 64 KiB to /dev/null in a loop (each write releases and retakes the GIL,
as the background threads' sendfile and poll do) at nice 0, nice 10 or under SCHED_IDLE, or no
helper at all (the reference); and one busy process per CPU at normal priority. The switch
interval is the bookie's (1 ms).

Why a lower priority hurts: a thread back from a syscall waits for the GIL and, after the
switch interval, asks the holder to drop it; CPython's holder then waits, at its next release,
until that thread has taken the GIL, and a low-priority thread on busy CPUs gets there late.

Usage: python3 bench/gil_priority.py [--seconds 10]
Ends with `BENCH gil_priority none_p999_ms=<n> nice0_p999_ms=<n> nice10_p999_ms=<n>
idle_p999_ms=<n> idle_max_ms=<n>`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

CASES = ("none", "nice0", "nice10", "idle")
SWITCH_INTERVAL = 0.001  # quire/bookie.py's


def helper(case: str, stop: threading.Event) -> None:
    tid = threading.get_native_id()
    if case == "idle":
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    elif case == "nice10":
        os.setpriority(os.PRIO_PROCESS, tid, 10)
    fd = os.open(os.devnull, os.O_WRONLY)
    chunk = bytes(64 << 10)
    try:
        while not stop.is_set():
            os.write(fd, chunk)
            sum(range(50))  # a little bytecode between syscalls, as the send loop has
    finally:
        os.close(fd)


def run_case(case: str, seconds: float) -> dict[str, float]:
    sys.setswitchinterval(SWITCH_INTERVAL)
    spin = f"import time\nt = time.monotonic() + {seconds + 2}\nwhile time.monotonic() < t: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    stop = threading.Event()
    thread = threading.Thread(target=helper, args=(case, stop)) if case != "none" else None
    late: list[float] = []
    try:
        if thread is not None:
            thread.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            time.sleep(0.001)
            x = 0
            for i in range(2000):  # the round's own Python work
                x += i
            late.append(time.monotonic() - t0)
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        for p in busy:
            p.kill()
            p.wait()
    late.sort()
    n = len(late)
    return {"rounds": n, "p50_ms": late[n // 2] * 1000, "p99_ms": late[int(n * 0.99)] * 1000,
            "p999_ms": late[int(n * 0.999)] * 1000, "max_ms": late[-1] * 1000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per case")
    ap.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # one case, in a child process
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.seconds)))
        return 0
    if not hasattr(os, "SCHED_IDLE"):
        print("needs Linux (SCHED_IDLE)", file=sys.stderr)
        return 2
    results = {}
    for case in CASES:
        out = subprocess.run([sys.executable, __file__, "--case", case, "--seconds", str(args.seconds)],
                             capture_output=True, text=True, check=True).stdout
        r = results[case] = json.loads(out.splitlines()[-1])
        print(f"{case:7} {r['rounds']:6d} rounds of 1 ms: late p50 {r['p50_ms']:.2f}, p99 {r['p99_ms']:.2f}, "
              f"p99.9 {r['p999_ms']:.2f}, max {r['max_ms']:.1f} ms", flush=True)
    print("BENCH gil_priority " + " ".join(f"{c}_p999_ms={results[c]['p999_ms']:.2f}" for c in CASES)
          + f" idle_max_ms={results['idle']['max_ms']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
