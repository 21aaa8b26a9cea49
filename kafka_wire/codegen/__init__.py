"""Generator of kafka_wire.messages from Apache Kafka's JSON message schemas, read from the pinned
jars of kafka_wire.codegen.jars (`python3 -m kafka_wire.codegen [--check]`)."""
