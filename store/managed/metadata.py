"""A segmented log's metadata node: its ledgers in order, its properties and config (JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from store.managed.config import LogConfig
from store.managed.position import Position

_FORMAT = 1


@dataclass(frozen=True)
class OffloadInfo:
    """Where a closed ledger's offloaded copy lives (store/offload): its data and index objects
    in the tier named by `driver`. Set by one compare-and-set once the copy is verified, so a
    ledger is either on bookies alone or also offloaded, never half; `bookie_deleted` once the
    bookie copy is gone (after quire.offload.deletion.lag.ms): from then on only the tier has it."""

    driver: str  # "fs" or "s3"
    data: str  # object keys
    index: str
    size: int  # data object length
    digest: str  # sha256 of the data object
    at_ms: int  # when the copy was recorded
    bookie_deleted: bool = False

    def to_doc(self) -> dict[str, Any]:
        return {"driver": self.driver, "data": self.data, "index": self.index, "size": self.size,
                "digest": self.digest, "at_ms": self.at_ms, "bk_deleted": self.bookie_deleted}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> OffloadInfo:
        return cls(str(d["driver"]), str(d["data"]), str(d["index"]), int(d["size"]), str(d["digest"]),
                   int(d["at_ms"]), bool(d.get("bk_deleted", False)))


@dataclass
class LedgerInfo:
    ledger_id: int
    entries: int = 0  # 0 while the ledger is the owner's open one
    size: int = 0
    first_ms: int = 0  # time of the first / last entry (approximate after recovery)
    last_ms: int = 0
    props: dict[str, str] = field(default_factory=dict)
    closed: bool = False
    offload: OffloadInfo | None = None  # set once a verified offloaded copy exists
    # A rewrite (log compaction) holding this ledger's entries, entry for entry: positions stay
    # valid, and the ledger keeps its id and place in the log. None: the ledger holds its own.
    data: int | None = None

    @property
    def data_id(self) -> int:
        """The ledger to read this ledger's entries from."""
        return self.ledger_id if self.data is None else self.data

    def to_doc(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.ledger_id, "entries": self.entries, "size": self.size}
        d.update(first_ms=self.first_ms, last_ms=self.last_ms, closed=self.closed)
        if self.props:
            d["props"] = self.props
        if self.offload is not None:
            d["offload"] = self.offload.to_doc()
        if self.data is not None:
            d["data"] = self.data
        return d

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> LedgerInfo:
        return cls(
            ledger_id=int(d["id"]),
            entries=int(d["entries"]),
            size=int(d["size"]),
            first_ms=int(d.get("first_ms", 0)),
            last_ms=int(d.get("last_ms", 0)),
            props={str(k): str(v) for k, v in d.get("props", {}).items()},
            closed=bool(d.get("closed", False)),
            offload=OffloadInfo.from_doc(d["offload"]) if "offload" in d else None,
            data=int(d["data"]) if "data" in d else None,
        )

    def copy(self) -> LedgerInfo:
        return LedgerInfo(
            self.ledger_id,
            self.entries,
            self.size,
            self.first_ms,
            self.last_ms,
            dict(self.props),
            self.closed,
            self.offload,
            self.data,
        )


@dataclass
class LogMetadata:
    ledgers: list[LedgerInfo] = field(default_factory=list)
    props: dict[str, str] = field(default_factory=dict)
    config: LogConfig | None = None
    # Everything before this position was truncated (DeleteRecords); EARLIEST if never.
    start: Position | None = None
    # Ledgers dropped from the list but deleted only later: (ledger id, not before ms). An
    # empty tail ledger recovered from a paused owner stays fenced on the bookies only as long
    # as it exists there, so it is kept a while.
    deferred: list[tuple[int, int]] = field(default_factory=list)
    version: int = -1  # metadata-store version this copy was read at; not serialised

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {"format": _FORMAT, "ledgers": [li.to_doc() for li in self.ledgers]}
        if self.props:
            doc["props"] = self.props
        if self.config is not None:
            doc["config"] = self.config.to_dict()
        if self.start is not None:
            doc["start"] = list(self.start)
        if self.deferred:
            doc["deferred"] = [list(d) for d in self.deferred]
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, version: int = -1) -> LogMetadata:
        doc: dict[str, Any] = json.loads(data) if data else {"format": _FORMAT, "ledgers": []}
        if doc.get("format") != _FORMAT:
            raise ValueError(f"unsupported managed-log metadata format {doc.get('format')!r}")
        start = doc.get("start")
        return cls(
            ledgers=[LedgerInfo.from_doc(d) for d in doc.get("ledgers", [])],
            props={str(k): str(v) for k, v in doc.get("props", {}).items()},
            config=LogConfig.from_dict(doc["config"]) if "config" in doc else None,
            start=Position(int(start[0]), int(start[1])) if start else None,
            deferred=[(int(a), int(b)) for a, b in doc.get("deferred", [])],
            version=version,
        )

    def copy(self) -> LogMetadata:
        return LogMetadata(
            [li.copy() for li in self.ledgers],
            dict(self.props),
            self.config,
            self.start,
            list(self.deferred),
            self.version,
        )
