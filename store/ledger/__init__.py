"""The ledger client: quorum writes, LAC, ensemble change, fencing and recovery over bookies."""

from store.ledger.client import LedgerClient
from store.ledger.errors import (
    LedgerClosedError,
    LedgerError,
    LedgerFencedError,
    LedgerReadError,
    LedgerRecoveryError,
    MetadataVersionError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
    ReadBeyondLacError,
)
from store.ledger.metadata import LedgerMetadata
from store.ledger.placement import PlacementPolicy, RackAwarePlacement, RandomPlacement
from store.ledger.reader import LedgerReader
from store.ledger.writer import LedgerWriter

__all__ = [
    "LedgerClient",
    "LedgerClosedError",
    "LedgerError",
    "LedgerFencedError",
    "LedgerMetadata",
    "LedgerReadError",
    "LedgerReader",
    "LedgerRecoveryError",
    "LedgerWriter",
    "MetadataVersionError",
    "NoSuchLedgerError",
    "NotEnoughBookiesError",
    "PlacementPolicy",
    "RackAwarePlacement",
    "RandomPlacement",
    "ReadBeyondLacError",
]
