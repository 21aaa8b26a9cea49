"""Where each store component keeps its state in the metadata store (one place for all paths)."""

from __future__ import annotations

BOOKIES_AVAILABLE = "/bookies/available"  # ephemeral child per live bookie, named host:port
BOOKIES_COOKIES = "/bookies/cookies"  # persistent child per bookie ever registered
LEDGERS = "/ledgers"  # persistent child per ledger: its metadata
LEDGER_ID_GEN = "/ledgers-idgen"  # sequential children allocate ledger ids
MANAGED_LOGS = "/managed"  # segmented logs (store/managed)
# Auto-recovery (store/recovery)
RECOVERY_AUDITOR = "/recovery/auditor"  # ephemeral: the elected auditor's id
UNDER_REPLICATED = "/recovery/underreplicated"  # persistent child per under-replicated ledger
RECOVERY_LOCKS = "/recovery/locks"  # ephemeral child per ledger a worker is re-replicating
RECOVERY_STATS = "/recovery/stats"  # counters (bytes re-replicated ...), updated with CAS
DECOMMISSIONED = "/recovery/decommission"  # persistent child per bookie being drained


def bookie_available(address: str) -> str:
    return f"{BOOKIES_AVAILABLE}/{address}"


def bookie_cookie(address: str) -> str:
    return f"{BOOKIES_COOKIES}/{address}"


def ledger(ledger_id: int) -> str:
    return f"{LEDGERS}/{ledger_id:019d}"


OFFLOAD_REQUESTS = "/offload-requests"  # a child per segmented log whose owner should offload now


def offload_request(encoded_log_name: str) -> str:
    return f"{OFFLOAD_REQUESTS}/{encoded_log_name}"


def under_replicated(ledger_id: int) -> str:
    return f"{UNDER_REPLICATED}/{ledger_id:019d}"


def recovery_lock(ledger_id: int) -> str:
    return f"{RECOVERY_LOCKS}/{ledger_id:019d}"


def decommissioned(address: str) -> str:
    return f"{DECOMMISSIONED}/{address}"
