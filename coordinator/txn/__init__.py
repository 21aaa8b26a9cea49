"""Kafka's transaction coordinator, one TxnCoordinator per shard of `__transaction_state`,
persisted as Kafka's own transaction-log records."""

from coordinator.txn.config import TRANSACTION_STATE_TOPIC, TxnConfig
from coordinator.txn.coordinator import DescribedTxn, InitResult, MarkerSender, TxnCoordinator, TxnMarkers
from coordinator.txn.state import TxnMetadata, TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC", "DescribedTxn", "InitResult", "MarkerSender", "TxnConfig", "TxnCoordinator",
    "TxnMarkers", "TxnMetadata", "TxnState",
]
