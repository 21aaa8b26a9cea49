"""Status codes of the bookie protocol and the client-side exceptions they map to."""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    OK = 0
    NO_LEDGER = 1  # this bookie has no such ledger (a valid negative answer for recovery)
    NO_ENTRY = 2  # the ledger exists here, the entry does not
    BAD_REQUEST = 3  # malformed frame or arguments
    IO_ERROR = 4
    FENCED = 5  # the ledger is fenced: non-recovery adds are refused
    DIGEST_MISMATCH = 6  # the entry's CRC32C does not match its bytes
    READ_ONLY = 7
    TOO_MANY_REQUESTS = 8
    TIMEOUT = 9  # a long poll ended without news


class BookieError(Exception):
    status: Status = Status.IO_ERROR

    def __init__(self, message: str, status: Status | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class NoLedgerError(BookieError):
    status = Status.NO_LEDGER


class NoEntryError(BookieError):
    status = Status.NO_ENTRY


class BadRequestError(BookieError):
    status = Status.BAD_REQUEST


class FencedError(BookieError):
    status = Status.FENCED


class DigestMismatchError(BookieError):
    status = Status.DIGEST_MISMATCH


class ReadOnlyError(BookieError):
    """The bookie's disk is full: it serves reads but refuses adds (writers change ensemble)."""

    status = Status.READ_ONLY


class BookieUnavailableError(BookieError):
    """Connection refused, dropped or timed out: the bookie may be down or slow."""


_BY_STATUS: dict[Status, type[BookieError]] = {
    Status.NO_LEDGER: NoLedgerError,
    Status.NO_ENTRY: NoEntryError,
    Status.BAD_REQUEST: BadRequestError,
    Status.FENCED: FencedError,
    Status.DIGEST_MISMATCH: DigestMismatchError,
    Status.READ_ONLY: ReadOnlyError,
}


def error_for(status: int, message: str) -> BookieError:
    try:
        st = Status(status)
    except ValueError:
        return BookieError(f"unknown status {status}: {message}")
    return _BY_STATUS.get(st, BookieError)(message, st)
