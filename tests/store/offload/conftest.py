from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from store.ledger.client import LedgerClient
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from store.offload import OffloadSettings, make_tier
from store.offload.tier import Tier


def tier_settings(kind: str, tmp_path: Path, seaweed: Any) -> OffloadSettings:
    if kind == "fs":
        return OffloadSettings(driver="fs", directory=str(tmp_path / "offload"))
    return OffloadSettings(
        driver="s3",
        s3_endpoint=seaweed.endpoint,
        s3_bucket=seaweed.new_bucket(),
        s3_prefix="quire",
        s3_access_key=seaweed.access_key,
        s3_secret_key=seaweed.secret_key,
    )


@pytest.fixture
async def store(meta_url: str) -> AsyncIterator[tuple[MetaStore, LedgerClient]]:
    meta = open_meta(meta_url)
    await meta.start()
    client = LedgerClient(meta)
    try:
        yield meta, client
    finally:
        await client.close()
        await meta.close()


@pytest.fixture(params=["fs", "s3"])
async def tier(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Tier]:
    sw = request.getfixturevalue("seaweed") if request.param == "s3" else None
    t = make_tier(tier_settings(request.param, tmp_path, sw))
    assert t is not None
    try:
        yield t
    finally:
        await t.close()
