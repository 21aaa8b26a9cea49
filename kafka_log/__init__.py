"""The Kafka view of the store's segmented logs: one stored entry is one record batch, and
offsets map to positions (ledger id, entry id) through an offset index kept in ledger
properties. Offset -> position, the log-end offset, iterating batches from an offset and
replaying a log all live here, for every Kafka log: partitions served by the gateway,
`__consumer_offsets` replayed by the group coordinator, and snapshots read by `quire admin`.
Per-ledger Kafka state beside the offset index (the aborted-transactions index, txn.py, with
the partition owner <-> transaction coordinator interface: MarkerWriter, TxnVerifier) and
offset-range work (share groups acquiring records) belong here too, on KafkaLogView.

API: `KafkaLogView(log, index)` (seek / remember / forget_positions, position_of, batches,
find_batch, replay), `scan` (entries from a position in large reads), `batch_offsets`,
`stored_end_offset` / `log_end_offset`, and the index itself (`OffsetIndex`, `LedgerIndex`).

Why a top-level package: the coordinator replays its logs but may not import `gateway/`, and
`store/` knows nothing of Kafka; so this sits between them, importing only `store/` (segmented
logs, positions) and `kafka_wire/` (batch headers), and both gateway and coordinator import it.
"""

from kafka_log.index import LedgerIndex, OffsetIndex
from kafka_log.view import (
    SCAN_BYTES,
    SCAN_ENTRIES,
    KafkaLogView,
    SegmentedLog,
    batch_offsets,
    log_end_offset,
    scan,
    stored_end_offset,
)

__all__ = [
    "SCAN_BYTES",
    "SCAN_ENTRIES",
    "KafkaLogView",
    "LedgerIndex",
    "OffsetIndex",
    "SegmentedLog",
    "batch_offsets",
    "log_end_offset",
    "scan",
    "stored_end_offset",
]
