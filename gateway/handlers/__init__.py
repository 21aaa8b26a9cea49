"""Kafka API handlers: one module per API (or pair of APIs), listed in registry.py."""
