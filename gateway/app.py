"""Assembles one gateway process: metadata store, ledger client, topic registry, cluster view,
partition manager, producer ids and the Kafka server; runs it until stopped."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.cluster.membership import ClusterView, GatewayNode, allocate_node_id
from gateway.cluster.partitions import PartitionManager
from gateway.config import GatewayConfig
from gateway.fetch_sessions import FetchSessionCache
from gateway.groups import GroupCoordinators
from gateway.partition.cleaner import LogCleaner
from gateway.partition.producer_ids import ProducerIdAllocator
from gateway.server import GatewayServer
from gateway.services import GatewayServices
from gateway.topics.configs import set_broker_defaults
from gateway.topics.registry import TopicRegistry
from gateway.txns import TxnCoordinators, txn_verifier
from store.ledger.client import LedgerClient
from store.managed.cache import EntryCache
from store.meta.factory import open_meta
from store.offload import make_tier
from store.offload.offloader import Offloader
from store.tasks import ProcessStop

log = logging.getLogger(__name__)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


async def run_gateway(
    config: GatewayConfig,
    *,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[GatewayServer], None] | None = None,
) -> None:
    """Run one gateway until `stop` is set (default: until SIGINT/SIGTERM), then shut down
    cleanly: stop accepting, close connections, close partition logs and release their leases."""
    ends = ProcessStop(stop)
    stop = ends.event
    set_broker_defaults(config.topic_defaults)
    sock = _bind(config.listen_host, config.listen_port)
    host, port = config.advertised(sock.getsockname()[1])
    meta = open_meta(config.meta_url, session_timeout=config.meta_session_timeout_s)
    await meta.start()
    # Without a session this gateway's leases are gone and others own its partitions.
    ends.on_session_lost(meta, log, "metadata-store session lost: shutting the gateway down")
    ledgers = LedgerClient(meta)
    topics = TopicRegistry(meta)
    tier = make_tier(config.offload) if config.offload is not None else None
    offloader = (
        Offloader(tier, deletion_lag_ms=config.offload_deletion_lag_ms,
                  max_concurrent_ledgers=config.offload_max_concurrent_ledgers)
        if tier is not None else None
    )
    cleaner = LogCleaner(config.cleaner)
    cluster: ClusterView | None = None
    partitions: PartitionManager | None = None
    server: GatewayServer | None = None
    services: GatewayServices | None = None
    try:
        await topics.start()
        node_id = config.node_id if config.node_id is not None else await allocate_node_id(meta, host, port)
        node = GatewayNode(node_id, host, port, config.rack)
        cluster = ClusterView(meta, node, topics)
        await cluster.start()
        partitions = PartitionManager(
            meta, ledgers, topics, cluster, node_id,
            cache=EntryCache(config.cache_mb << 20) if config.cache_mb else EntryCache(),
            replication=(config.ensemble_size, config.write_quorum, config.ack_quorum),
            offloader=offloader, cleaner=cleaner,
        )
        await partitions.start()
        late = await partitions.settle()
        if late:
            log.warning("gateway %d serving before %d of its partitions opened (they go on opening)", node_id, late)
        services = GatewayServices(
            node_id=node_id, config=config, meta=meta, ledgers=ledgers, topics=topics, cluster=cluster,
            partitions=partitions, producer_ids=ProducerIdAllocator(meta), offloader=offloader,
            fetch_sessions=FetchSessionCache(config.fetch_session_cache_slots),
        )
        # Started with the gateway, not on the first group request, so that committed offsets
        # reach the cursors of partitions this gateway owns even if it coordinates no group.
        services.groups = GroupCoordinators(services)
        services.groups.start()
        services.txns = TxnCoordinators(services, services.groups)
        services.txns.start()
        services.txn_verifier = txn_verifier(services.txns, node_id)
        server = GatewayServer(services)
        await server.start(sock)
        log.info("gateway %d serving on %s:%d (advertised %s:%d)", node_id, config.listen_host, server.port,
                 host, port)
        if on_ready is not None:
            on_ready(server)
        await stop.wait()
        log.info("gateway %d shutting down", node_id)
    finally:
        if server is not None:
            await server.close(min(config.shutdown_grace_s, 5.0))
        else:
            sock.close()
        if services is not None and services.txns is not None:
            await _quietly(services.txns.close(), "closing transaction coordinators")
        if services is not None and services.groups is not None:
            await _quietly(services.groups.close(), "closing group coordinators")
        if services is not None and services.shares is not None:
            await _quietly(services.shares.close(), "closing share-partitions")
        if partitions is not None:
            await _quietly(partitions.close(), "closing partitions")
        await _quietly(cleaner.close(), "stopping the log cleaner")
        if cluster is not None:
            await _quietly(cluster.close(), "leaving the cluster")
        if offloader is not None:
            await _quietly(offloader.close(), "stopping offloads")
            await _quietly(offloader.tier.close(), "closing the offload tier")
        await _quietly(topics.close(), "closing the topic registry")
        await _quietly(ledgers.close(), "closing the ledger client")
        await _quietly(meta.close(), "closing the metadata store")
    if ends.session_lost:
        raise SystemExit(ends.exit_code)


async def _quietly(coro: Coroutine[Any, Any, Any], what: str) -> None:
    try:
        await coro
    except Exception:
        log.exception("%s failed", what)
