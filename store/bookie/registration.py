"""A bookie's identity (cookie) and its liveness registration in the metadata store.

Cookie: DIR/cookie and JOURNAL_DIR/cookie hold {"instance_id", "address"}; the metadata node
bookie_cookie(address) holds the same. First start creates all of them. A wiped directory
whose address already has a metadata cookie, or a directory that belongs to another bookie,
is refused: serving empty data under a known identity would make recovery count "no such
entry" answers that are not true.

Registration: an ephemeral node bookie_available(address) with JSON describing the bookie.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import uuid
from pathlib import Path

from store import layout
from store.bookie.journal import fsync_dir
from store.clock import SYSTEM_CLOCK, Clock
from store.meta.api import MetaStore, NodeExistsError, NoNodeError
from store.retry import Backoff, Retry

log = logging.getLogger(__name__)

COOKIE_FILE = "cookie"
# While another session still holds our availability node (a previous run whose session has
# not expired yet), until stale_wait.
STALE_BACKOFF = Backoff(initial=0.25, maximum=2.0)


class CookieMismatchError(Exception):
    """The directories and the metadata store disagree about this bookie's identity."""


def read_dir_cookie(directory: Path) -> dict[str, str] | None:
    path = directory / COOKIE_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CookieMismatchError(f"unreadable cookie {path}: {e}") from e
    if not isinstance(data, dict) or "instance_id" not in data:
        raise CookieMismatchError(f"cookie {path} has no instance_id")
    return data


def write_dir_cookie(directory: Path, cookie: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (COOKIE_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(cookie, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / COOKIE_FILE)
    fsync_dir(directory)


async def check_cookie(meta: MetaStore, address: str, data_dir: Path, journal_dir: Path) -> str:
    """Validate (or on first start create) the cookies; returns the instance id."""
    dirs = [data_dir] if journal_dir == data_dir else [data_dir, journal_dir]
    local = {d: read_dir_cookie(d) for d in dirs}
    try:
        raw, _ = await meta.get(layout.bookie_cookie(address))
        stored: dict[str, str] | None = json.loads(raw)
    except NoNodeError:
        stored = None
    for d, c in local.items():
        if c is not None and c.get("address") != address:
            raise CookieMismatchError(
                f"directory {d} belongs to bookie {c.get('address')} (instance {c['instance_id']}), "
                f"not to {address}: refusing to start with another bookie's directory"
            )
    if stored is not None:
        for d, c in local.items():
            if c is None:
                raise CookieMismatchError(
                    f"directory {d} has no cookie but the metadata store has one for {address} "
                    f"(instance {stored['instance_id']}): the disk was wiped or replaced; refusing to "
                    "start and serve empty data; if the data is really gone, run "
                    "`quire bookie format --data-dir DIR --port PORT --meta URL` and auto-recovery refills it"
                )
            if c["instance_id"] != stored["instance_id"]:
                raise CookieMismatchError(
                    f"directory {d} has cookie instance {c['instance_id']} but the metadata store "
                    f"has instance {stored['instance_id']} for {address}: directories were swapped "
                    "or belong to another bookie; refusing to start"
                )
        return stored["instance_id"]
    ids = {c["instance_id"] for c in local.values() if c is not None}
    if len(ids) > 1:
        raise CookieMismatchError(f"directories {dirs} hold cookies of different instances {sorted(ids)}")
    # First start, or a first start interrupted after the directory cookies were written.
    instance_id = ids.pop() if ids else uuid.uuid4().hex
    cookie = {"instance_id": instance_id, "address": address}
    for d, c in local.items():
        if c is None:
            write_dir_cookie(d, cookie)
    try:
        await meta.create(layout.bookie_cookie(address), json.dumps(cookie).encode(), make_parents=True)
    except NodeExistsError:
        return await check_cookie(meta, address, data_dir, journal_dir)
    return instance_id


async def format_bookie(meta: MetaStore, address: str, data_dir: Path, journal_dir: Path) -> str:
    """Give the bookie at `address` a new, empty identity (BookKeeper's bookieformat): refuse
    while it is registered (running); empty its directories, delete its cookie in the metadata
    store and write fresh ones. Returns the new instance id. Ledgers that named the bookie are
    refilled by auto-recovery (the auditor's sampled check finds the missing entries)."""
    if await meta.exists(layout.bookie_available(address)) is not None:
        raise CookieMismatchError(f"bookie {address} is running (registered): stop it before formatting")
    for d in {data_dir, journal_dir}:
        if d.exists():
            for child in d.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    try:
        await meta.delete(layout.bookie_cookie(address))
    except NoNodeError:
        pass
    return await check_cookie(meta, address, data_dir, journal_dir)


def _used_bytes(dirs: list[Path]) -> int:
    total = 0
    for d in set(dirs):
        for root, _, files in os.walk(d):
            for name in files:
                try:
                    total += os.stat(os.path.join(root, name)).st_size
                except OSError:
                    pass
    return total


class Registration:
    """The bookie's ephemeral availability node."""

    def __init__(
        self,
        meta: MetaStore,
        address: str,
        rack: str | None,
        instance_id: str,
        data_dir: Path,
        journal_dir: Path,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.meta = meta
        self.clock = clock
        self.address = address
        self.rack = rack
        self.instance_id = instance_id
        self.data_dir = data_dir
        self.journal_dir = journal_dir
        self.path = layout.bookie_available(address)
        self.read_only = False  # disk full: placement skips this bookie (store.bookie.disk)

    async def _info(self) -> bytes:
        used = await asyncio.to_thread(_used_bytes, [self.data_dir, self.journal_dir])
        free = shutil.disk_usage(self.data_dir).free
        return json.dumps(
            {
                "address": self.address,
                "rack": self.rack,
                "instance_id": self.instance_id,
                "data_dir": str(self.data_dir),
                "disk_used_bytes": used,
                "disk_free_bytes": free,
                "read_only": self.read_only,
            }
        ).encode()

    async def register(self, stale_wait: float = 30.0) -> None:
        data = await self._info()
        retry = Retry(STALE_BACKOFF, within=stale_wait, clock=self.clock)
        while True:
            try:
                await self.meta.create(self.path, data, ephemeral=True, make_parents=True)
                return
            except NodeExistsError:
                pass
            try:
                raw, stat = await self.meta.get(self.path)
            except NoNodeError:
                continue
            if stat.ephemeral_owner == self.meta.session_id:
                return
            try:
                other = json.loads(raw).get("instance_id")
            except ValueError:
                other = None
            if other == self.instance_id:
                # Our own previous incarnation (we hold the port, so it is dead): drop it now
                # instead of waiting for its session to expire.
                log.info("removing stale registration %s of a previous run", self.path)
                try:
                    await self.meta.delete(self.path)
                except NoNodeError:
                    pass
                continue
            if not await retry.pause():
                raise CookieMismatchError(f"{self.path} is registered by another instance ({other})")

    async def refresh(self) -> None:
        await self.meta.set(self.path, await self._info())

    async def unregister(self) -> None:
        try:
            await self.meta.delete(self.path)
        except NoNodeError:
            pass
