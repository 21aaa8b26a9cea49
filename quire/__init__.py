"""Quire: a Kafka-protocol-compatible gateway over a quorum-replicated segmented log store."""

__version__ = "0.1.0"
