"""The error a Kafka request fails with, raised by handlers and by the domain code below them
(partitions, topics, groups): it carries the Kafka error code the response reports. It sits
below the handlers so that domain code raising it does not depend on the handler registry."""

from __future__ import annotations


class KafkaApiError(Exception):
    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or f"Kafka error {error_code}")
        self.error_code = error_code
        self.message = message
