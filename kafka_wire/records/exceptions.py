"""The error a record batch check raises: a DecodeError that carries the Kafka error code a
broker answers with for that batch."""

from __future__ import annotations

from kafka_wire.errors import ErrorCode
from kafka_wire.exceptions import DecodeError


class InvalidBatch(DecodeError):
    """A batch Kafka would refuse. `error_code` is what a Produce response should carry:
    CORRUPT_MESSAGE for damaged bytes (sizes, CRC, codec streams), INVALID_RECORD for well-formed
    input Kafka's validator refuses (magic v0/v1, inconsistent counts, control batches from
    clients), UNSUPPORTED_COMPRESSION_TYPE for an unknown codec id or zstd before Produce v7."""

    def __init__(
        self,
        what: str,
        error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE,
        where: str = "record batch",
        offset: int = -1,
    ) -> None:
        super().__init__(what, where, offset)
        self.error_code = error_code
