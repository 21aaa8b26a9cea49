"""The segment-centric replicated log store. It knows nothing of Kafka."""
