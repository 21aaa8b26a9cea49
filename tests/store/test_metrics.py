"""Metrics read on scrape from live objects: several in one process add up (tests run several
gateways, each with its cache), and one that goes away stops counting."""

from __future__ import annotations

import gc

from prometheus_client import REGISTRY

from store.managed.cache import EntryCache


def _value(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0  # absent while no cache is alive


def test_entry_caches_are_summed_while_alive() -> None:
    gc.collect()
    hits0, bytes0 = _value("quire_entry_cache_hits_total"), _value("quire_entry_cache_bytes")
    a, b = EntryCache(1 << 20), EntryCache(1 << 20)
    a.insert(a.new_token(), 1, 0, b"x" * 100)
    b.insert(b.new_token(), 1, 0, b"y" * 200)
    assert a.get(1, 1, 0) is not None and b.get(1, 1, 0) is not None and b.get(1, 1, 1) is None
    assert _value("quire_entry_cache_hits_total") == hits0 + 2
    assert _value("quire_entry_cache_bytes") == bytes0 + a.size + b.size
    del a
    gc.collect()
    assert _value("quire_entry_cache_hits_total") == hits0 + 1
    assert _value("quire_entry_cache_bytes") == bytes0 + b.size
