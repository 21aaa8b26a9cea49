"""`quire admin topics`: the tables of topics and of one topic's partitions."""

from __future__ import annotations

from typing import Any

from quire.admin_output import size, table


def render_topics(docs: list[dict[str, Any]]) -> str:
    rows = [
        (d["name"], d["topic_id"], d["partitions"], d["owned_partitions"], _configs(d["configs"]))
        for d in docs
    ]
    return table(["TOPIC", "ID", "PARTITIONS", "OWNED", "CONFIGS"], rows)


def _configs(configs: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(configs.items())) or "-"


def render_topic(doc: dict[str, Any]) -> str:
    out = [
        f"Topic: {doc['name']}  id: {doc['topic_id']}  partitions: {len(doc['partitions'])}  "
        f"configs: {_configs(doc['configs'])}",
        "",
    ]
    rows = []
    for p in doc["partitions"]:
        owner = f"{p['owner']} ({p['owner_address']})" if p["owner_address"] else p["owner"]
        epochs = " ".join(f"{e}@{o}" for e, o in p["epochs"]) or None
        rows.append(
            (
                p["partition"],
                owner,
                p["leader_epoch"],
                p["log_start_offset"],
                p["next_offset"],
                size(p["size"]),
                len(p["ledgers"]),
                epochs,
            )
        )
    out.append(
        table(["PARTITION", "OWNER", "EPOCH", "START", "END", "SIZE", "LEDGERS", "EPOCH_HISTORY"], rows)
    )
    lrows = []
    for p in doc["partitions"]:
        for lg in p["ledgers"]:
            quorum = "/".join(map(str, lg.get("quorum", []))) or None
            ens = "; ".join(f"{first}:{','.join(bk)}" for first, bk in lg["ensembles"]) or None
            offsets = None if lg["first_offset"] is None else f"{lg['first_offset']}..{lg['next_offset']}"
            lrows.append(
                (
                    p["partition"],
                    lg["ledger_id"],
                    lg["state"],
                    lg["entries"],
                    size(lg["size"]),
                    offsets,
                    quorum,
                    ens,
                )
            )
    if lrows:
        out += [
            "",
            table(
                [
                    "PARTITION",
                    "LEDGER",
                    "STATE",
                    "ENTRIES",
                    "SIZE",
                    "OFFSETS",
                    "E/WQ/AQ",
                    "ENSEMBLES (first entry: bookies)",
                ],
                lrows,
            ),
        ]
    return "\n".join(out)
