"""The Kafka-protocol server over segmented logs."""
