"""Offload's Prometheus metrics, exported by processes that run an offload tier: bytes offloaded,
copy failures, read latency of the tier (bookie reads have quire_bookie_client_request_seconds),
and the offload lag (closed ledgers the policy selects that are not offloaded yet)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from store.metrics import LATENCY_BUCKETS, InstanceCollector, LazyMetrics

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric


class _Pending(Protocol):
    """An Offloader, as seen here (no import of it: it imports this module)."""

    @property
    def pending_bytes(self) -> int: ...

OFFLOADED_BYTES = Counter("quire_offload_offloaded_bytes", "Bytes of ledgers copied to the offload tier",
                          ["driver"], registry=None)
OFFLOAD_FAILURES = Counter("quire_offload_failures", "Offload passes that failed (retried with backoff)",
                           ["driver"], registry=None)
TIER_READ_SECONDS = Histogram("quire_offload_read_seconds", "Latency of reads from the offload tier",
                              ["driver"], buckets=LATENCY_BUCKETS, registry=None)
OFFLOAD_METRICS = LazyMetrics(OFFLOADED_BYTES, OFFLOAD_FAILURES, TIER_READ_SECONDS)


def _lag(offloaders: list[_Pending]) -> Iterator[Metric]:
    lag = GaugeMetricFamily("quire_offload_lag_bytes",
                            "Bytes of closed ledgers the offload policy selects that are not offloaded yet")
    lag.add_metric([], sum(o.pending_bytes for o in offloaders))
    return iter((lag,))


OFFLOADERS: InstanceCollector[_Pending] = InstanceCollector(_lag)
