"""`quire recovery`: a standalone auto-recovery process (an auditor candidate and a replication
worker), for clusters whose bookies run with --no-recovery-enable or that want more workers."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket

from quire import settings as st
from quire.bookie import recovery_config
from store.bookie.client import BookiePool
from store.meta.factory import open_meta
from store.metrics import start_metrics
from store.recovery.service import AutoRecovery, RecoveryConfig, recovery_env
from store.tasks import ProcessStop

log = logging.getLogger(__name__)


async def _serve(meta_url: str, config: RecoveryConfig) -> int:
    stop = ProcessStop()
    meta = open_meta(meta_url)
    await meta.start()
    stop.on_session_lost(meta, log, "metadata session lost: stopping (the auditor role and ledger locks are gone)")
    pool = BookiePool()
    node_id = f"recovery {socket.gethostname()}:{os.getpid()}"
    auto = AutoRecovery(recovery_env(meta, pool), node_id, config)
    try:
        auto.start()
        log.info("%s running", node_id)
        await stop.event.wait()
    finally:
        await auto.close()
        await pool.close_all()
        with contextlib.suppress(Exception):
            await meta.close()
    return stop.exit_code


def main(args: argparse.Namespace) -> int:
    r = st.resolve(st.RECOVERY, args, file=args.config)
    if r.get_value("quire.meta") is None:
        raise st.SettingsError("missing --meta (quire.meta)")
    start_metrics(st.metrics(r))
    return asyncio.run(_serve(r.get_value("quire.meta"), recovery_config(r)))
