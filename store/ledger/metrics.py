"""The ledger client's Prometheus metrics, exported by processes that run a LedgerClient."""

from __future__ import annotations

from prometheus_client import Counter

from store.metrics import LazyMetrics

ENSEMBLE_CHANGES = Counter(
    "quire_ledger_ensemble_changes", "Ledger ensemble changes (a bookie replaced mid-write)", registry=None
)
LEDGER_RECOVERIES = Counter(
    "quire_ledger_recoveries", "Ledger recoveries started (fence, find the end, close)", registry=None
)
LEDGER_METRICS = LazyMetrics(ENSEMBLE_CHANGES, LEDGER_RECOVERIES)
