"""The bookie process's Prometheus metrics: its journal's group commits (records and bytes per
batch, fdatasync latency, where each ran; observed once per batch) and its
background range reads (background_reads.py).
Client-side metrics (latency per bookie) are in store/metrics.py.

Registered when a journal is made (see LazyMetrics): gateways import this package too."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from store.metrics import LATENCY_BUCKETS, LazyMetrics

JOURNAL_BATCH_RECORDS = Histogram(
    "quire_bookie_journal_batch_records", "Records per journal group commit (one write, one fdatasync)",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096), registry=None,
)
JOURNAL_BATCH_BYTES = Histogram(
    "quire_bookie_journal_batch_bytes", "Bytes per journal group commit",
    buckets=(256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20), registry=None,
)
JOURNAL_FDATASYNC_SECONDS = Histogram(
    "quire_bookie_journal_fdatasync_seconds", "Latency of the journal's fdatasync (one per group commit)",
    buckets=LATENCY_BUCKETS, registry=None,
)
JOURNAL_COMMITS = Counter(
    "quire_bookie_journal_commits", "Journal group commits, by where they ran: on the event loop, or on the "
    "writer thread (for a spell after the loop's recent commits took longer than quire.bookie.journal.loop.sync.max.s "
    "on average)", ["on"], registry=None,
)
_ON_LOOP, _ON_THREAD = JOURNAL_COMMITS.labels("loop"), JOURNAL_COMMITS.labels("thread")
JOURNAL_METRICS = LazyMetrics(JOURNAL_BATCH_RECORDS, JOURNAL_BATCH_BYTES, JOURNAL_FDATASYNC_SECONDS, JOURNAL_COMMITS)
BACKGROUND_READ_BYTES = Counter(
    "quire_bookie_background_read_bytes", "Bytes of READ_RANGE responses sent by the low-priority background "
    "read threads (sendfile from the entry logs)", registry=None,
)
BACKGROUND_READ_METRICS = LazyMetrics(BACKGROUND_READ_BYTES)


def journal_batch(records: int, nbytes: int, fdatasync_s: float | None) -> None:
    """One group commit written (fdatasync_s None: written without fdatasync)."""
    JOURNAL_BATCH_RECORDS.observe(records)
    JOURNAL_BATCH_BYTES.observe(nbytes)
    if fdatasync_s is not None:
        JOURNAL_FDATASYNC_SECONDS.observe(fdatasync_s)


def journal_commit(on_loop: bool) -> None:
    """One group commit started, on the event loop or through the writer thread."""
    (_ON_LOOP if on_loop else _ON_THREAD).inc()
