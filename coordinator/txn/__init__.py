"""Kafka's transaction coordinator, one TxnCoordinator per shard of `__transaction_state`,
persisted as Kafka's own transaction-log records."""
