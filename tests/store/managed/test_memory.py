"""Memory a gateway holds for its readers stays within the entry cache's budget: cached views
do not pin the large buffers they come from, and catch-up readers' read-ahead (hundreds of
partitions at once) lands in that one bounded cache instead of per-log buffers."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Iterator

import pytest

from store.managed.cache import EntryCache, retained_size
from store.managed.reads import BookieReads

MiB = 1 << 20


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def test_small_views_of_large_frames_do_not_keep_the_frames(traced: None) -> None:
    cache = EntryCache(4 * MiB)
    before = tracemalloc.get_traced_memory()[0]
    for i in range(64):
        frame = bytearray(MiB)  # a request frame holding one 100-byte batch
        frame[1000:1100] = bytes([i]) * 100
        cache.insert(1, 1, i, memoryview(frame)[1000:1100])
        del frame
    held = tracemalloc.get_traced_memory()[0] - before
    assert len(cache) == 64
    assert held < 2 * MiB, f"{held} bytes held for 6400 bytes of entries"
    got = cache.get(1, 1, 7)
    assert got is not None and bytes(got) == bytes([7]) * 100
    assert retained_size(got) == 100


def test_a_view_that_is_most_of_its_buffer_is_kept_without_a_copy_and_counted_at_its_size() -> None:
    cache = EntryCache(4 * MiB)
    frame = bytes(1000)
    view = memoryview(frame)[10:]
    cache.insert(1, 1, 0, view)
    assert cache.get(1, 1, 0) is view
    assert retained_size(view) == len(frame)
    assert cache.size >= len(frame)  # what it keeps alive, not its 990 bytes
    cache.invalidate(1)
    assert cache.size == 0


class _Handle:
    """A closed ledger of `count` entries of `size` bytes; each read returns fresh buffers, as
    a read from bookies does."""

    def __init__(self, ledger_id: int, count: int, size: int) -> None:
        self.ledger_id = ledger_id
        self.last_add_confirmed = count - 1
        self.size = size

    async def read(self, first: int, last: int, max_bytes: int | None = None) -> list[bytes]:
        await asyncio.sleep(0)
        if max_bytes is not None:  # as the real reader: about max_bytes, at least one entry
            last = min(last, first + max(1, -(-max_bytes // self.size)) - 1)
        return [bytes(self.size) for _ in range(first, last + 1)]

    async def read_lac(self) -> int:
        return self.last_add_confirmed

    async def close(self) -> None:
        pass


class _Client:
    def __init__(self, count: int, size: int) -> None:
        self.count, self.size = count, size

    async def open(self, ledger_id: int, *, recovery: bool = False) -> _Handle:
        return _Handle(ledger_id, self.count, self.size)


async def test_read_ahead_of_many_catch_up_readers_stays_within_the_cache_budget(traced: None) -> None:
    entry, count = 16 << 10, 400
    cache = EntryCache(2 * MiB)
    client = _Client(count, entry)
    readers = [
        BookieReads(client, chunk_bytes=512 << 10, cache=cache, token=cache.new_token())  # type: ignore[arg-type]
        for _ in range(40)
    ]
    before = tracemalloc.get_traced_memory()[0]
    for r in readers:
        # One entry asked for: the rest of the chunk read and a read-ahead of the next chunk
        # would stay behind in each reader (about 1 MiB each, 40 MiB in all) without a bound.
        got = await r.read(1, 0, 0, count - 1, entry, entry)
        assert len(got) == 1 and len(got[0]) == entry
        del got
    in_flight = [t for r in readers for t in r._ahead.values()]
    await asyncio.gather(*in_flight, return_exceptions=True)
    held = tracemalloc.get_traced_memory()[0] - before
    assert cache.reserved == 0
    assert cache.size <= cache.max_bytes
    assert held < 2 * cache.max_bytes, f"{held} bytes held for a {cache.max_bytes}-byte cache"
    assert all(not r._ahead for r in readers)


async def test_a_reader_finds_what_was_read_ahead_for_it_in_the_cache() -> None:
    entry, count = 1024, 100
    cache = EntryCache(8 * MiB)
    token = cache.new_token()
    reads = BookieReads(_Client(count, entry), chunk_bytes=16 << 10, cache=cache, token=token)  # type: ignore[arg-type]
    got = await reads.read(1, 0, 3, count - 1, 4 * entry, entry)
    assert len(got) == 4
    # The rest of the first chunk is cached at once; the read-ahead of the next on landing.
    assert len(cache.get_range(token, 1, 4, 15, MiB)) == 12
    await asyncio.gather(*reads._ahead.values())
    assert len(cache.get_range(token, 1, 16, 31, MiB)) == 16
    assert cache.reserved == 0
