"""The gateway's TCP listener: accepts Kafka connections and tracks them for shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from gateway.connection import KafkaConnection
from store.metrics import InstanceCollector
from store.tasks import within

if TYPE_CHECKING:
    from gateway.config import GatewayConfig
    from gateway.services import GatewayServices

log = logging.getLogger(__name__)


class GatewayServer:
    def __init__(self, services: GatewayServices) -> None:
        self.services = services
        self.config: GatewayConfig = services.config
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.AbstractServer | None = None
        self.port = 0
        SERVERS.track(self)

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen on config.listen_host:listen_port (or on an already bound socket)."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await loop.create_server(lambda: KafkaConnection(self.services, self.connections), sock=sock, backlog=1024)
        else:
            self._server = await loop.create_server(
                lambda: KafkaConnection(self.services, self.connections), self.config.listen_host, self.config.listen_port,
                reuse_address=True, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        for s in self._server.sockets:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log.info("gateway listening on %s:%d", self.config.listen_host, self.port)

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self, grace: float = 5.0) -> None:
        """Stop accepting and reading requests, give those in flight up to `grace` seconds to be
        answered (so acknowledged work is reported to clients), then close every connection."""
        self.stop_accepting()
        for c in list(self.connections):
            c.stop_reading()
        if self.connections:
            with contextlib.suppress(TimeoutError):
                await within(asyncio.gather(*(c.wait_idle() for c in self.connections)), grace)
        for c in list(self.connections):
            c.close()
        if self._server is not None:
            try:
                await within(self._server.wait_closed(), 5.0)
            except TimeoutError:
                log.warning("gateway connections did not close within 5 s")


# -- gauges read on scrape: open connections of every live server in this process


def _server_metrics(servers: list[GatewayServer]) -> Iterator[Metric]:
    family = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count", "Open client connections")
    family.add_metric([], sum(len(s.connections) for s in servers))
    yield family


SERVERS: InstanceCollector[GatewayServer] = InstanceCollector(_server_metrics)
