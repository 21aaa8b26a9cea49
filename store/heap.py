"""CPython's cyclic garbage collector in a long-running server process (gateway, bookie).

A full collection walks every tracked object, and holds the GIL, so the whole process pauses.
In a gateway taking 20 MB/s of produce they came 4 to 10 times a minute and took 25 to 40 ms of
CPU each (30 to 90 ms of wall time on a busy machine), walking some 51,000 objects of which
28,000 were made at startup (modules, classes, functions, settings) and are never garbage.
`settle_heap`, called once a server serves:
- collects, then freezes what is left (gc.freeze): later collections skip those objects;
- raises the youngest generation's threshold from CPython's 700 to GEN0_THRESHOLD container
  allocations: a request's short-lived objects are freed by reference counting long before a
  collection comes, so fewer young collections promote fewer of them to the older
  generations, whose size is what sets off the full passes. Cyclic garbage waits that much
  longer to be found: a bound of a few MB.
It also times every collection into quire_gc_pause_seconds{generation} (a histogram), so that
a latency spike can be matched with a pause.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Histogram

GEN0_THRESHOLD = 10_000

GC_PAUSE = Histogram(
    "quire_gc_pause_seconds", "Pauses of CPython's cyclic garbage collector, per generation collected",
    ["generation"], buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))


class _PauseTimer:
    """A gc callback (gc.callbacks): observes each collection's wall time."""

    def __init__(self) -> None:
        self._started = 0.0
        self._by_generation = [GC_PAUSE.labels(str(g)) for g in range(3)]

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._by_generation[info["generation"]].observe(time.perf_counter() - self._started)


def settle_heap() -> None:
    """Once a server process is up (see the module's docstring); again is harmless."""
    if not any(isinstance(cb, _PauseTimer) for cb in gc.callbacks):
        gc.callbacks.append(_PauseTimer())
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
