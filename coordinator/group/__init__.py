"""Kafka's classic consumer-group coordinator, one GroupCoordinator per shard of
`__consumer_offsets`, persisted as Kafka's own offsets-topic records."""
