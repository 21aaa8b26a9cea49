"""Generator of kafka_wire.messages from Apache Kafka's JSON message schemas."""

from kafka_wire.codegen.module import generate
from kafka_wire.codegen.schema import default_schema_dir

__all__ = ["default_schema_dir", "generate"]
