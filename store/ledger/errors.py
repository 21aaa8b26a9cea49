"""Errors raised by the ledger client."""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every ledger-client error."""


class LedgerFencedError(LedgerError):
    """Another process fenced (is recovering or has closed) this ledger: the writer is done."""


class LedgerClosedError(LedgerError):
    """The ledger (or this handle) is closed: no more adds."""


class NoSuchLedgerError(LedgerError):
    """No metadata for this ledger id."""


class NotEnoughBookiesError(LedgerError):
    """Fewer suitable live bookies than the ensemble needs."""


class LedgerRecoveryError(LedgerError):
    """Recovery could not reach enough bookies to decide where the ledger ends."""


class MetadataVersionError(LedgerError):
    """A compare-and-set on the ledger metadata lost against a change we cannot merge."""


class LedgerReadError(LedgerError):
    """No replica could serve an entry (all failed, timed out or returned bad digests)."""


class ReadBeyondLacError(LedgerReadError):
    """A read asked for entries past the last add confirmed: they may never become durable."""
