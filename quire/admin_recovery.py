"""`quire admin ledgers` and `recovery`: under-replicated ledgers and auto-recovery status."""

from __future__ import annotations

from typing import Any

from quire.admin_output import size, table, when


def render_under_replicated(docs: list[dict[str, Any]]) -> str:
    rows = [
        (
            d["ledger_id"],
            ", ".join(f"{a} ({b['reason']})" for a, b in sorted(d["bookies"].items())),
            when(d["since_ms"]),
            "yes" if d["in_progress"] else "no",
        )
        for d in docs
    ]
    return table(["LEDGER", "BOOKIES", "SINCE", "IN_PROGRESS"], rows)


def render_recovery(doc: dict[str, Any]) -> str:
    last = doc["last_replication_s"]
    rows = [
        ("auditor", doc["auditor"] or "none elected"),
        ("under-replicated ledgers", doc["under_replicated"]),
        ("in progress", doc["in_progress"]),
        ("re-replicated", f"{size(doc['bytes_rereplicated'])} ({doc['entries_rereplicated']} entries, "
                          f"{doc['ledgers_rereplicated']} ledgers)"),
        ("last ledger fully replicated after", "-" if last is None else f"{last:.1f} s"),
        ("last sampled check", when(doc["last_check_ms"] or 0)),
        ("decommissioning", ", ".join(doc["decommissioning"]) or "-"),
    ]
    return table(["RECOVERY", "STATUS"], rows)
