"""Taking ownership of a segmented log, and deleting one.

Taking ownership (BookKeeper-style, as Pulsar's managed ledger does at topic load): read the
metadata and remember its version, open the last ledger with recovery (this fences a previous
owner and closes the ledger where the ack quorum says it ends), start a new ledger, and
compare-and-set the metadata with the remembered version. Losing that CAS means another
process won: OwnershipLostError.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from store.ledger.errors import LedgerError, NoSuchLedgerError
from store.managed.config import LogConfig
from store.managed.cursor_codec import decode_meta
from store.managed.errors import ManagedLogError, NoSuchLogError, OwnershipLostError
from store.managed.ledgers import LedgerClientLike
from store.managed.metadata import LedgerInfo, LogMetadata
from store.managed.names import cursors_path, log_path
from store.meta.api import BadVersionError, MetaStore, NodeExistsError, NoNodeError

log = logging.getLogger(__name__)

LEDGER_PROP_LOG = "quire.managed-log"


def now_ms() -> int:
    return int(time.time() * 1000)


async def best_effort(coro: Any, what: str) -> None:
    try:
        await coro
    except Exception as e:
        log.info("ignored failure: %s: %r", what, e)


async def take_ownership(
    meta: MetaStore,
    client: LedgerClientLike,
    name: str,
    config: LogConfig | None,
    create: bool,
    new_ledger_props: Callable[[], dict[str, str]] | None,
) -> tuple[LogMetadata, LogConfig, Any]:
    """Returns the metadata as written (with its new version), the config, and the writer of
    the new current ledger."""
    path = log_path(name)
    try:
        data, stat = await meta.get(path)
    except NoNodeError:
        if not create:
            raise NoSuchLogError(name) from None
        with contextlib.suppress(NodeExistsError):
            await meta.create(path, LogMetadata(config=config or LogConfig()).to_bytes(), make_parents=True)
        with contextlib.suppress(NodeExistsError):
            await meta.create(cursors_path(name), b"")
        data, stat = await meta.get(path)
    md = LogMetadata.from_bytes(data, stat.version)
    cfg = config or md.config or LogConfig()
    md.config = cfg
    now = now_ms()
    if md.ledgers and not md.ledgers[-1].closed:
        tail = md.ledgers[-1]
        try:
            reader = await client.open(tail.ledger_id, recovery=True)
        except NoSuchLedgerError:
            md.ledgers.pop()
        else:
            tail.entries = reader.last_add_confirmed + 1
            tail.size = int(reader.metadata.length)
            tail.first_ms = tail.first_ms or int(reader.metadata.ctime_ms)
            tail.last_ms = max(tail.last_ms, now) if tail.entries else tail.first_ms
            tail.closed = True
            await best_effort(reader.close(), "close recovered ledger")
    not_before = now + int(cfg.deferred_delete_s * 1000)
    md.deferred += [(li.ledger_id, not_before) for li in md.ledgers if li.closed and li.entries == 0]
    md.ledgers = [li for li in md.ledgers if not (li.closed and li.entries == 0)]
    writer = await client.create(
        cfg.ensemble_size, cfg.write_quorum, cfg.ack_quorum, properties={LEDGER_PROP_LOG: name}
    )
    props = new_ledger_props() if new_ledger_props else {}
    md.ledgers.append(LedgerInfo(writer.ledger_id, props=dict(props)))
    try:
        stat = await meta.set(path, md.to_bytes(), md.version)
    except (BadVersionError, NoNodeError):
        await best_effort(writer.close(), "close unused ledger")
        await best_effort(client.delete(writer.ledger_id), "delete unused ledger")
        raise OwnershipLostError(f"log {name!r}: another owner updated the metadata first") from None
    md.version = stat.version
    return md, cfg, writer


async def delete_log(
    meta: MetaStore, client: LedgerClientLike, name: str, *, ledger_ids: list[int] | None = None
) -> None:
    """Delete a log nobody in this process owns: ledgers, cursor ledgers, metadata."""
    path = log_path(name)
    try:
        data, _ = await meta.get(path)
    except NoNodeError:
        data = b""
    ids = set(ledger_ids or ())
    if data:
        md = LogMetadata.from_bytes(data)
        ids.update(li.ledger_id for li in md.ledgers)
        ids.update(li.data for li in md.ledgers if li.data is not None)
        ids.update(lid for lid, _ in md.deferred)
    with contextlib.suppress(NoNodeError):
        for seg in await meta.children(cursors_path(name)):
            with contextlib.suppress(NoNodeError, ManagedLogError):
                cdata, _ = await meta.get(f"{cursors_path(name)}/{seg}")
                lid, _, _ = decode_meta(cdata)
                if lid >= 0:
                    ids.add(lid)
    for lid in sorted(ids):
        try:
            await client.delete(lid)
        except (NoSuchLedgerError, LedgerError) as e:
            log.info("delete_log %s: ledger %d: %r", name, lid, e)
    with contextlib.suppress(NoNodeError):
        await meta.delete(path, recursive=True)
