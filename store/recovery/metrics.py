"""Auto-recovery's Prometheus metrics, exported by processes that run an auditor or a worker
(bookies, `quire recovery`). The cluster-wide totals are also kept in the metadata store for
`quire admin recovery status` (store/recovery/marks.py)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from store.metrics import LazyMetrics

UNDER_REPLICATED_LEDGERS = Gauge(
    "quire_recovery_under_replicated_ledgers",
    "Ledgers marked under-replicated, as the elected auditor last counted them (0 elsewhere)", registry=None,
)
BYTES_REREPLICATED = Counter(
    "quire_recovery_rereplicated_bytes", "Entry bytes copied to replacement bookies by this process's worker",
    registry=None,
)
ENTRIES_REREPLICATED = Counter(
    "quire_recovery_rereplicated_entries", "Entries copied to replacement bookies by this process's worker",
    registry=None,
)
TIME_TO_REPLICATION = Histogram(
    "quire_recovery_time_to_full_replication_seconds",
    "From a ledger's under-replication mark (the loss noticed) to the ledger fully replicated",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600), registry=None,
)
RECOVERY_METRICS = LazyMetrics(UNDER_REPLICATED_LEDGERS, BYTES_REREPLICATED, ENTRIES_REREPLICATED,
                               TIME_TO_REPLICATION)
