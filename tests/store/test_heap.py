"""settle_heap: a server's startup objects frozen out of the collector, a higher young-generation
threshold, and every collection timed into quire_gc_pause_seconds."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from store.heap import GEN0_THRESHOLD, _PauseTimer, settle_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """This test process's collector as it was: thresholds, callbacks, nothing left frozen.

    Automatic collections are off meanwhile, so the counts below see only the test's explicit
    ones: in the full suite other threads allocate, and reading a registry that holds many
    processes' worth of metrics allocates past any young threshold."""
    threshold = gc.get_threshold()
    callbacks = list(gc.callbacks)
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.unfreeze()
        gc.set_threshold(*threshold)
        gc.callbacks[:] = callbacks


def count(generation: int) -> float:
    """Collections of that generation timed so far."""
    return REGISTRY.get_sample_value("quire_gc_pause_seconds_count", {"generation": str(generation)}) or 0.0


@pytest.mark.usefixtures("restored_gc")
def test_settle_heap_freezes_startup_objects_raises_the_young_threshold_and_times_collections() -> None:
    survivor = [object() for _ in range(100)]  # alive at "startup": frozen
    full_before = count(2)
    settle_heap()
    assert gc.get_freeze_count() >= len(survivor)
    assert gc.get_threshold()[0] == GEN0_THRESHOLD
    assert count(2) == full_before + 1  # settle_heap's own full collection, timed
    young_before = count(0)
    gc.collect(0)
    assert count(0) == young_before + 1
    settle_heap()  # again: still one timer
    assert sum(isinstance(cb, _PauseTimer) for cb in gc.callbacks) == 1
    assert count(2) == full_before + 2
