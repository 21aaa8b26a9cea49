from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.store.managed.fakes import FakeLedgerClient


@pytest.fixture
async def meta(tmp_path: Path) -> AsyncIterator[MetaStore]:
    m = open_meta(f"embedded://{tmp_path / 'meta'}")
    await m.start()
    try:
        yield m
    finally:
        await m.close()


@pytest.fixture
def fake_client() -> FakeLedgerClient:
    return FakeLedgerClient()
