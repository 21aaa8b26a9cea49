"""What a compat scenario runs against: a bootstrap address, and how it was obtained."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.gateway import StandaloneGateway

BOOTSTRAP_ENV = "QUIRE_COMPAT_BOOTSTRAP"
KAFKA_BOOTSTRAP_ENV = "QUIRE_COMPAT_KAFKA_BOOTSTRAP"


@dataclass(frozen=True)
class Target:
    """`kind` is "standalone", "cluster" (started by the harness) or "external" (--bootstrap)."""

    kind: str
    bootstrap: str

    @property
    def first(self) -> str:
        """One address of the bootstrap list (for raw single-connection requests)."""
        return self.bootstrap.split(",")[0]


@contextmanager
def quire_standalone(data_dir: Path, bookies: int = 1) -> Iterator[StandaloneGateway]:
    """`quire standalone` with fast group settings (no initial rebalance delay to wait out)."""
    from tests.coordinator.gateway_support import fast_group_env
    from tests.support.gateway import StandaloneGateway

    with fast_group_env():
        gw = StandaloneGateway(data_dir, bookies=bookies)
        gw.start()
    try:
        yield gw
    finally:
        gw.stop(timeout=20.0)


@dataclass
class QuireCluster:
    """ZooKeeper (the caller's) + 3 bookie processes + 2 `quire gateway` processes."""

    meta_url: str
    base: Path
    bookies: list[Any] = field(default_factory=list)  # tests.support.bookies.BookieProcess
    gateways: list[Any] = field(default_factory=list)  # the failover test's GatewayProc

    @property
    def bootstrap(self) -> str:
        return ",".join(g.address for g in self.gateways)

    def start(self, n_bookies: int = 3, n_gateways: int = 2) -> QuireCluster:
        from tests.coordinator.gateway_support import fast_group_env
        from tests.support.bookies import start_bookies
        from tests.support.cluster import GatewayProc

        self.base.mkdir(parents=True, exist_ok=True)
        self.bookies = start_bookies(n_bookies, self.meta_url, self.base / "bookies")
        with fast_group_env():
            for n in range(1, n_gateways + 1):
                g = GatewayProc(n, self.meta_url, self.base / f"gateway-{n}.log")
                g.start()
                self.gateways.append(g)
            for g in self.gateways:
                g.wait_ready()
        asyncio.run(self._wait_registered(n_gateways))
        return self

    async def _wait_registered(self, n: int, within: float = 60.0) -> None:
        """Until every gateway is listed as a live broker, so Metadata shows all of them."""
        from gateway.cluster import inspect
        from store.meta.factory import open_meta

        meta = open_meta(self.meta_url)
        await meta.start()
        try:
            deadline = time.monotonic() + within
            while True:
                if len(await inspect.gateways(meta)) >= n:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{n} gateways did not register within {within} s")
                await asyncio.sleep(0.1)
        finally:
            await meta.close()

    def stop(self) -> None:
        from tests.support.bookies import stop_all

        for g in self.gateways:
            g.kill()
        stop_all(self.bookies)


def external_bootstrap(option: str | None) -> str | None:
    return option or os.environ.get(BOOTSTRAP_ENV) or None
