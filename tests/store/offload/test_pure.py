"""Offload's pure parts: the policy, the index object, the filesystem backend."""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from store.managed.config import LogConfig
from store.managed.metadata import LedgerInfo, LogMetadata, OffloadInfo
from store.offload import tier as tier_mod
from store.offload.backend import FsBackend
from store.offload.format import LedgerIndex, object_names
from store.offload.policy import bookie_copies_due, offloaded, on_bookies, to_offload
from store.offload.tier import Tier

NOW = 10_000_000


def ledgers(*sizes: int, ages_ms: tuple[int, ...] = ()) -> list[LedgerInfo]:
    out = [LedgerInfo(i, entries=10, size=s, last_ms=NOW - (ages_ms[i] if ages_ms else 0), closed=True)
           for i, s in enumerate(sizes)]
    out.append(LedgerInfo(len(sizes)))  # the open current ledger
    return out


def info(at: int = NOW, deleted: bool = False) -> OffloadInfo:
    return OffloadInfo("fs", "d", "i", 1, "00", at, deleted)


def test_size_rule_keeps_the_newest_bytes_on_bookies() -> None:
    cfg = LogConfig(offload=True, offload_bytes=250)
    lgs = ledgers(100, 100, 100, 100)
    assert to_offload(lgs, cfg, NOW) == [0, 1]  # 100+100 newest stay (<= 250), the third crosses
    assert to_offload(lgs, LogConfig(offload=True, offload_bytes=0), NOW) == [0, 1, 2, 3]
    assert to_offload(lgs, LogConfig(offload=False, offload_bytes=0), NOW) == []
    assert to_offload(lgs, LogConfig(), NOW, force=True) == [0, 1, 2, 3]
    lgs[0].offload = info()
    assert to_offload(lgs, cfg, NOW) == [1]


def test_age_rule_and_empty_or_open_ledgers_never_go() -> None:
    lgs = ledgers(10, 10, 10, ages_ms=(5000, 3000, 100))
    assert to_offload(lgs, LogConfig(offload=True, offload_ms=2000), NOW) == [0, 1]
    lgs[0].entries = 0
    assert to_offload(lgs, LogConfig(offload=True, offload_ms=0), NOW) == [1, 2]


def test_bookie_copies_go_after_the_lag_and_byte_counts() -> None:
    lgs = ledgers(100, 100, 100)
    lgs[0].offload, lgs[1].offload = info(NOW - 5000, deleted=True), info(NOW - 5000)
    lgs[2].offload = info(NOW - 10)
    assert bookie_copies_due(lgs, 1000, NOW) == [1]
    assert on_bookies(lgs) == 200 and offloaded(lgs) == 3


def test_offload_location_round_trips_in_log_metadata() -> None:
    md = LogMetadata(ledgers=ledgers(5))
    md.ledgers[0].offload = info(deleted=True)
    back = LogMetadata.from_bytes(md.to_bytes())
    assert back.ledgers[0].offload == info(deleted=True) and back.ledgers[1].offload is None


def test_index_object_round_trip_and_names_are_unique() -> None:
    idx = LedgerIndex(7, 30, b"x" * 32, array("Q", [0, 10, 30]))
    back = LedgerIndex.from_bytes(idx.to_bytes())
    assert (back.ledger_id, back.entries, back.data_size, list(back.offsets)) == (7, 2, 30, [0, 10, 30])
    with pytest.raises(ValueError):
        LedgerIndex.from_bytes(idx.to_bytes()[:-8])
    assert object_names(7) != object_names(7) and object_names(7)[0].startswith("ledgers/00000000000000000007-")


def test_fs_backend(tmp_path: Path) -> None:
    b = FsBackend(tmp_path)
    assert b.put_stream("ledgers/a.data", [b"abc", b"def"]) == 6
    assert b.get_range("ledgers/a.data", 2, 5) == b"cde" and b.size("ledgers/a.data") == 6
    b.put("ledgers/a.index", b"i")
    assert [o.key for o in b.list_objects("ledgers/")] == ["ledgers/a.data", "ledgers/a.index"]
    b.delete("ledgers/a.data")
    b.delete("ledgers/a.data")
    assert [o.key for o in b.list_objects("")] == ["ledgers/a.index"]
    with pytest.raises(ValueError):
        b.get("../x")

    def failing() -> Iterator[bytes]:
        yield b"x"
        raise OSError("disk gone")

    with pytest.raises(OSError):
        b.put_stream("ledgers/b.data", failing())
    assert [o.key for o in b.list_objects("")] == ["ledgers/a.index"]  # nothing partial left


class _Handle:
    def __init__(self, entries: list[bytes]) -> None:
        self.entries = entries
        self.is_closed = True
        self.last_add_confirmed = len(entries) - 1
        self.metadata = type("Md", (), {"length": sum(map(len, entries))})()

    async def read(self, first: int, last: int) -> list[bytes]:
        return self.entries[first : last + 1]

    async def close(self) -> None:
        pass


class _Client:
    def __init__(self, entries: list[bytes]) -> None:
        self.entries = entries

    async def open(self, ledger_id: int, *, recovery: bool = False) -> _Handle:
        return _Handle(self.entries)


class _DiesAfterOnePart(FsBackend):
    def put_stream(self, key: str, parts: Iterable[bytes]) -> int:
        next(iter(parts))
        raise OSError("store went away")


async def test_copy_round_trip_and_a_failed_upload_neither_hangs_nor_leaves_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tier_mod, "COPY_CHUNK_BYTES", 1000)  # 10 entries a chunk: more chunks than slots
    entries = [bytes([i]) * 100 for i in range(100)]
    tier = Tier(FsBackend(tmp_path / "ok"))
    got = await tier.copy_ledger(_Client(entries), 3)  # type: ignore[arg-type]
    assert got.size == 100 * 100
    assert await tier.read(got, 5, 99, 350) == entries[5:8]  # max_bytes bounds a read
    assert await tier.read(got, 98, 200, 1 << 20) == entries[98:]
    await tier.close()
    bad = Tier(_DiesAfterOnePart(tmp_path / "bad"))
    with pytest.raises(OSError):
        await asyncio.wait_for(bad.copy_ledger(_Client(entries), 3), 30)  # type: ignore[arg-type]
    assert await bad.objects() == []
    await bad.close()
