"""The gateway's errors that code above the raiser handles: KafkaApiError, the error a Kafka
request fails with, raised by handlers and by the domain code below them (partitions, topics,
groups), sits below the handlers so that domain code raising it does not depend on the handler
table; HandlerImportError ends start-up (the `quire` command prints it as one line)."""

from __future__ import annotations


class KafkaApiError(Exception):
    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or f"Kafka error {error_code}")
        self.error_code = error_code
        self.message = message


class HandlerImportError(Exception):
    """A Kafka API handler module failed to import: the gateway does not start, since running
    without that module's APIs would look healthy while serving less."""


class RecordValidationError(KafkaApiError):
    """A batch refused because of some of its records, as Kafka's RecordValidationException:
    the partition's error and message, and per record (index in the batch, message): the
    produce response's RecordErrors."""

    def __init__(self, error_code: int, message: str, record_errors: list[tuple[int, str | None]]) -> None:
        super().__init__(error_code, message)
        self.record_errors = record_errors
