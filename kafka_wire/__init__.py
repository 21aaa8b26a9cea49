"""Kafka wire protocol codec: bytes <-> messages and record batches. Does no I/O."""
