"""Kafka topics: names, configs and the registry kept in the metadata store."""
