"""Kafka partitions over segmented logs: offsets, indexes, producer state, leader epochs."""
