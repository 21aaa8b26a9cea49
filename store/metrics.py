"""The store's Prometheus metrics, client side (every process that uses ledgers): bookie request
latency per bookie and the entry cache. Also the pieces every layer's metrics share: serving
them over HTTP and collectors computed on scrape from live objects. The ledger client's
counters are in store/ledger/metrics.py, the bookie process's own (journal) in
store/bookie/metrics.py, so that each process exports only what it does.

Metrics live in prometheus_client's process-wide registry: one process, one endpoint. Counters
and histograms are module-level: several gateways in one test process add up into them, which
is what a scrape of that process should show. Values that belong to an object (cache size and
hits, connections, partitions owned) are read on scrape by an InstanceCollector from every live
object it tracks (weakly, so an object that goes away stops counting), summed: no per-instance
registry to create and tear down, nothing left registered after a test's gateway stops. (A
summed counter drops when its object goes away; that happens only in test processes, a server
process keeps its cache for its life.)
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Generic, TypeVar

from prometheus_client import REGISTRY, Histogram, start_http_server
from prometheus_client.registry import Collector

from store.bookie.protocol import Op

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric


T = TypeVar("T")
log = logging.getLogger(__name__)

# Latency buckets in seconds, 100 us to 10 s: quorum adds and reads on one host take well
# under a millisecond, a stalled bookie seconds.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)


def serve_metrics(host: str, port: int) -> int:
    """Serve this process's metrics at http://host:port/metrics (a daemon thread); the port
    (useful with port 0). OSError if the address is taken."""
    server, _thread = start_http_server(port, addr=host)
    return int(server.server_port)


METRICS_OFF = ("", "off", "none")
DEFAULT_METRICS = "127.0.0.1:9404"  # quire standalone's; its bookies take the following ports


def metrics_address(value: str | None) -> tuple[str, int] | None:
    """A quire.metrics value: (host, port), or None for "off"; ValueError if malformed."""
    if value is None or value.strip().lower() in METRICS_OFF:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"must be HOST:PORT or off, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def start_metrics(address: tuple[str, int] | None) -> str | None:
    """Serve metrics at (host, port); the URL, or None when off (None) or the port cannot be
    bound. Best effort: a taken port is a warning and the process's real work goes on."""
    if address is None:
        return None
    host, port = address
    try:
        port = serve_metrics(host, port)
    except OSError as e:
        log.warning("metrics: cannot listen on %s:%d (%s): not serving metrics (choose another with "
                    "--metrics HOST:PORT, or --metrics off)", host, port, e)
        return None
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
    log.info("serving metrics at %s", url)
    return url


class InstanceCollector(Collector, Generic[T]):
    """Metrics computed at scrape time from the live objects passed to track()."""

    def __init__(self, describe: Callable[[list[T]], Iterable[Metric]]) -> None:
        self._describe = describe
        self._objects: weakref.WeakSet[T] = weakref.WeakSet()
        self._lock = threading.Lock()  # scrapes run on the HTTP server's thread
        REGISTRY.register(self)

    def track(self, obj: T) -> None:
        with self._lock:
            self._objects.add(obj)

    def untrack(self, obj: T) -> None:
        with self._lock:
            self._objects.discard(obj)

    def collect(self) -> list[Metric]:
        with self._lock:
            objects = list(self._objects)
        if not objects:
            return []  # none in this process (a bookie has no entry cache): no zero-valued families
        for _ in range(3):
            try:
                return list(self._describe(objects))
            except RuntimeError:  # a dict changed size under us: the event loop runs meanwhile
                continue
        return []


class LazyMetrics:
    """Metrics (made with registry=None) registered when the first object that records them is
    made, not on import: a process imports more of the store than it runs (a gateway imports
    the bookie's configuration, a bookie the ledger client), and exports only what it runs."""

    def __init__(self, *metrics: Collector) -> None:
        self._metrics = metrics
        self._done = False
        self._lock = threading.Lock()

    def register(self) -> None:
        if self._done:
            return
        with self._lock:
            if not self._done:
                for m in self._metrics:
                    REGISTRY.register(m)
                self._done = True


# -- bookie client (latency per bookie and operation) -------------------------------------------

BOOKIE_REQUEST_SECONDS = Histogram(
    "quire_bookie_client_request_seconds",
    "Bookie request latency seen by the client (adds: until durable on that bookie), by bookie and operation",
    ["bookie", "op"], buckets=LATENCY_BUCKETS,
)
_OP_NAMES = {int(op): op.name.lower() for op in Op}


class BookieLatency:
    """One bookie connection's latency histograms, looked up once per operation."""

    __slots__ = ("_address", "_by_op", "_timeout")

    def __init__(self, address: str, request_timeout: float) -> None:
        self._address = address
        self._timeout = request_timeout
        self._by_op: dict[int, Histogram] = {}

    def observe(self, op: int, deadline: float, now: float) -> None:
        """A response to a request sent at deadline - request_timeout (the deadline the
        connection keeps anyway, so sending costs nothing extra)."""
        h = self._by_op.get(op)
        if h is None:
            h = self._by_op[op] = BOOKIE_REQUEST_SECONDS.labels(self._address, _OP_NAMES.get(op, str(op)))
        h.observe(now - deadline + self._timeout)
