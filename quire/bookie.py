"""`quire bookie`: the storage-node process (metadata registration, cookie check, serve until
SIGTERM/SIGINT). The server itself is store/bookie/server.py."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from quire.realtime import apply_realtime
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.client import BookiePool
from store.bookie.disk import DiskConfig, DiskMonitor, disk_usage_of
from store.bookie.server import BookieServer
from store.heap import settle_heap
from store.metrics import start_metrics
from store.recovery.service import AutoRecovery, RecoveryConfig, recovery_env
from store.tasks import ProcessStop, cancel_and_wait, run_async, within

if TYPE_CHECKING:
    from quire.settings import Resolved

log = logging.getLogger(__name__)
REFRESH_S = 5.0  # how fresh the disk use `quire admin bookies` shows is


async def _serve(
    data_dir: Path,
    journal_dir: Path,
    host: str,
    port: int,
    meta_url: str,
    rack: str | None,
    config: BookieConfig,
    disk: DiskConfig,
    recovery: RecoveryConfig | None,
) -> int:
    from store.bookie.registration import CookieMismatchError, Registration, check_cookie
    from store.meta.factory import open_meta

    stop = ProcessStop()
    address = f"{host}:{port}"
    meta = open_meta(meta_url)
    await meta.start()
    try:
        try:
            instance_id = await check_cookie(meta, address, data_dir, journal_dir)
        except CookieMismatchError as e:
            print(f"quire bookie {address}: {e}", file=sys.stderr)
            log.error("%s", e)
            return 2
        bookie = Bookie(data_dir, journal_dir, config)
        server = BookieServer(bookie, host, port)
        # Hold the port before touching the directories: no second bookie at this address.
        await server.listen(start_serving=False)
        try:
            await bookie.start()
            await server.start_serving()
            reg = Registration(meta, address, rack, instance_id, data_dir, journal_dir)
            stop.on_session_lost(
                meta, log, "metadata session lost: stopping, this bookie can no longer be trusted as alive")
            await reg.register()
            log.info("bookie %s serving (instance %s)", address, instance_id)
            settle_heap()

            poke = asyncio.Event()

            async def refresh() -> None:
                while True:
                    with contextlib.suppress(TimeoutError):
                        await within(poke.wait(), REFRESH_S)
                    poke.clear()
                    try:
                        await reg.refresh()
                    except Exception as e:
                        log.warning("could not refresh registration: %s", e)

            def disk_mode(read_only: bool) -> None:
                # Refuse adds at once; tell placement through the registration right away.
                bookie.read_only = reg.read_only = read_only
                poke.set()

            refresher = asyncio.create_task(refresh())
            monitor = DiskMonitor(disk_usage_of(data_dir), disk, disk_mode)
            monitor.start()
            auto: AutoRecovery | None = None
            pool = BookiePool()
            if recovery is not None:
                auto = AutoRecovery(recovery_env(meta, pool), f"bookie {address}", recovery)
                auto.start()
            await stop.event.wait()
            if auto is not None:
                await auto.close()
            await pool.close_all()
            await monitor.close()
            await cancel_and_wait([refresher])
            if not stop.session_lost:
                with contextlib.suppress(Exception):
                    await reg.unregister()
        finally:
            await server.close()
            await bookie.close()
    finally:
        with contextlib.suppress(Exception):
            await meta.close()
    return stop.exit_code


def run_bookie(
    *,
    data_dir: str,
    journal_dir: str | None,
    host: str,
    port: int,
    meta_url: str,
    rack: str | None,
    no_fsync: bool = False,
    journal_batch_wait: float | None = None,
    journal_loop_sync_max: float | None = None,
    background_read_threads: int | None = None,
    background_read_nice: int | None = None,
    background_read_ahead: int | None = None,
    flush_interval: float | None = None,
    write_cache_mb: float | None = None,
    metrics: tuple[str, int] | None = None,
    disk: DiskConfig | None = None,
    recovery: RecoveryConfig | None = None,
) -> int:
    """Run a bookie until SIGTERM/SIGINT (clean shutdown, everything flushed); the exit code.
    no_fsync: acknowledge adds without fdatasync (unsafe: benchmarks only). The others
    override BookieConfig / StorageConfig defaults (seconds, seconds, MiB). metrics: where to
    serve Prometheus metrics (None: not served). recovery: run auto-recovery (auditor
    candidate and replication worker) in this process (None: off)."""
    config = BookieConfig()
    if no_fsync:
        config.journal_sync = False
        print(
            f"quire bookie {host}:{port}: WARNING --no-fsync: the journal is not synced, "
            "acknowledged adds can be lost on a crash. For benchmarks only.",
            file=sys.stderr,
        )
    if journal_batch_wait is not None:
        config.journal_batch_wait = journal_batch_wait
    if journal_loop_sync_max is not None:
        config.journal_loop_sync_max = max(0.0, journal_loop_sync_max)
    if background_read_threads is not None:
        config.background_read_threads = max(1, background_read_threads)
    if background_read_nice is not None:
        config.background_read_nice = background_read_nice
    if background_read_ahead is not None:
        config.background_read_ahead = max(0, background_read_ahead)
    if flush_interval is not None:
        config.storage.flush_interval = flush_interval
    if write_cache_mb is not None:
        config.storage.write_cache_bytes = max(1 << 20, int(write_cache_mb * (1 << 20)))
    # The storage thread's Python work must not hold the loop off for the default 5 ms.
    sys.setswitchinterval(0.001)
    start_metrics(metrics)
    d = Path(data_dir).absolute()
    j = Path(journal_dir).absolute() if journal_dir else d / "journal"
    try:
        return run_async(_serve(d, j, host, port, meta_url, rack, config, disk or DiskConfig(), recovery))
    except OSError as e:
        print(f"quire bookie {host}:{port}: {e}", file=sys.stderr)
        return 1


def main(args: argparse.Namespace) -> int:
    from quire import settings as st

    r = st.resolve(st.BOOKIE, args, file=args.config)
    missing = [f"{s.flag_name} ({s.key})" for s in st.for_role(st.BOOKIE)
               if s.key in ("quire.meta", "quire.bookie.port", "quire.data.dir") and r.get_value(s.key) is None]
    if missing:
        raise st.SettingsError(f"missing {', '.join(missing)}")
    if getattr(args, "action", None) == "format":
        d = Path(r.get_value("quire.data.dir")).absolute()
        jd = r.get_value("quire.bookie.journal.dir")
        return format_main(d, Path(jd).absolute() if jd else d / "journal",
                           f"{r.get_value('quire.bookie.host')}:{r.get_value('quire.bookie.port')}",
                           r.get_value("quire.meta"))
    metrics = st.metrics(r)
    apply_realtime(r.get_value("quire.realtime.priority"))  # before any thread starts: they inherit it
    return run_bookie(
        data_dir=r.get_value("quire.data.dir"),
        journal_dir=r.get_value("quire.bookie.journal.dir"),
        host=r.get_value("quire.bookie.host"),
        port=r.get_value("quire.bookie.port"),
        meta_url=r.get_value("quire.meta"),
        rack=r.get_value("broker.rack"),
        no_fsync=not r.get_value("quire.bookie.fsync"),
        journal_batch_wait=r.get_value("quire.bookie.journal.batch.wait.s"),
        journal_loop_sync_max=r.get_value("quire.bookie.journal.loop.sync.max.s"),
        background_read_threads=r.get_value("quire.bookie.background.read.threads"),
        background_read_nice=r.get_value("quire.bookie.background.read.nice"),
        background_read_ahead=r.get_value("quire.bookie.background.read.ahead.bytes"),
        flush_interval=r.get_value("quire.bookie.flush.interval.s"),
        write_cache_mb=r.get_value("quire.bookie.write.cache.mb"),
        metrics=metrics,
        disk=DiskConfig(threshold=r.get_value("quire.bookie.disk.usage.threshold"),
                        lwm=r.get_value("quire.bookie.disk.usage.lwm"),
                        check_interval_s=r.get_value("quire.bookie.disk.check.interval.s")),
        recovery=recovery_config(r) if r.get_value("quire.recovery.enable") else None,
    )


def recovery_config(r: Resolved) -> RecoveryConfig:
    """Auto-recovery settings (shared by bookies and `quire recovery`)."""
    return RecoveryConfig(delay_s=r.get_value("quire.recovery.delay.s"),
                          audit_interval_s=r.get_value("quire.recovery.audit.interval.s"),
                          check_interval_s=r.get_value("quire.recovery.check.interval.s"),
                          check_sample=r.get_value("quire.recovery.check.sample"))


def format_main(data_dir: Path, journal_dir: Path, address: str, meta_url: str) -> int:
    """`quire bookie format`: a new empty identity for the bookie at `address`."""
    from store.bookie.registration import CookieMismatchError, format_bookie
    from store.meta.factory import open_meta

    async def go() -> str:
        meta = open_meta(meta_url)
        await meta.start()
        try:
            return await format_bookie(meta, address, data_dir, journal_dir)
        finally:
            await meta.close()

    try:
        instance = asyncio.run(go())
    except (CookieMismatchError, OSError) as e:
        print(f"quire bookie format {address}: {e}", file=sys.stderr)
        return 2
    print(f"bookie {address} formatted: {data_dir} is empty, new instance {instance}; "
          "start it and auto-recovery refills its ledgers")
    return 0
