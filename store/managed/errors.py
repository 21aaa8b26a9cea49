"""Errors raised by segmented logs and cursors."""

from __future__ import annotations


class ManagedLogError(Exception):
    """Base of every segmented-log error."""


class OwnershipLostError(ManagedLogError):
    """Another process took the log (a metadata compare-and-set lost, or our ledger was
    fenced): this handle stops writing for good. Reopen to continue, if we should own it."""


class LogClosedError(ManagedLogError):
    """The log handle (or cursor) was closed."""


class LogWriteError(ManagedLogError):
    """An append failed for another reason (e.g. not enough bookies); the handle stops writing."""


class NoSuchLogError(ManagedLogError):
    """No segmented log with that name exists."""


class NoSuchCursorError(ManagedLogError):
    """No cursor with that name exists on the log."""


class CursorStateError(ManagedLogError):
    """Cursor state could not be decoded or recovered."""
