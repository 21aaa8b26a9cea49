"""Kafka group, transaction and share-group coordinators."""
