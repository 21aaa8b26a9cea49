"""The gateway's Prometheus metrics, under Apache Kafka's names (as its JMX exporter writes them)
so that existing dashboards map: requests and their latency per API and version, bytes in/out
per topic, failed produce/fetch requests per topic and errors per code, connections, partitions
owned, leases gained and lost, and (from coordinator/metrics.py) consumer groups and lag.

Request paths pay one counter increment or histogram observe per request or per partition batch;
gauges are read on scrape from the live servers, partition managers and group coordinators
(see store/metrics.py for why the registry is process-wide).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge, Histogram

from kafka_wire.api import API_KEYS
from kafka_wire.errors import error_info

if TYPE_CHECKING:
    from kafka_wire.hotpath import FetchTopic

# -- requests (kafka.network:type=RequestMetrics) ----------------------------------------------

REQUESTS = Counter(
    "kafka_network_requestmetrics_requests", "Requests answered, by API and version", ["request", "version"]
)
REQUEST_TIME_MS = Histogram(
    "kafka_network_requestmetrics_totaltimems",
    "Request time from its arrival to its response being queued, in milliseconds (Fetch includes its wait)",
    ["request", "version"],
    buckets=(0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000),
)
ERRORS = Counter(
    "kafka_network_requestmetrics_errors", "Partition-level errors returned, by API and error name",
    ["request", "error"],
)

_request_children: dict[tuple[int, int], tuple[Any, Any]] = {}


def request_started() -> float:
    return time.perf_counter()


def request_done(api_key: int, version: int, started: float) -> None:
    """One request answered (or dropped), `started` from request_started()."""
    children = _request_children.get((api_key, version))
    if children is None:
        spec = API_KEYS.get(api_key)
        labels = (spec.name if spec is not None else str(api_key), str(version))
        children = _request_children[(api_key, version)] = (
            REQUESTS.labels(*labels), REQUEST_TIME_MS.labels(*labels))
    children[0].inc()
    children[1].observe((time.perf_counter() - started) * 1000.0)


# -- topics (kafka.server:type=BrokerTopicMetrics) -----------------------------------------------

BYTES_IN = Counter("kafka_server_brokertopicmetrics_bytesin", "Record bytes produced, by topic", ["topic"])
BYTES_OUT = Counter("kafka_server_brokertopicmetrics_bytesout", "Record bytes fetched, by topic", ["topic"])
FAILED_PRODUCE = Counter(
    "kafka_server_brokertopicmetrics_failedproducerequests", "Produce partitions answered with an error, by topic",
    ["topic"],
)
FAILED_FETCH = Counter(
    "kafka_server_brokertopicmetrics_failedfetchrequests", "Fetch partitions answered with an error, by topic",
    ["topic"],
)

NO_KEY_COMPACTED = Counter(
    "kafka_server_brokertopicmetrics_nokeycompactedtopicrecords",
    "Records refused by a compacted topic for having no key")

# -- the log cleaner (kafka.log:type=LogCleaner) -------------------------------------------------

CLEANER_PASSES = Counter("quire_log_cleaner_passes", "Log cleaner passes that rewrote ledgers")
CLEANER_LEDGERS = Counter("quire_log_cleaner_ledgers", "Ledgers rewritten by the log cleaner")
CLEANER_CLEAN_TIME = Gauge("kafka_log_logcleaner_max_clean_time_secs", "Duration of the last cleaning pass")


def bytes_in(by_topic: dict[str, int]) -> None:
    """Record bytes of a Produce request's batches accepted for appending, by topic."""
    for topic, n in by_topic.items():
        BYTES_IN.labels(topic).inc(n)


def produce_answered(by_topic: dict[Any, list[Any]]) -> None:
    """Count the errors of a Produce response's partitions (topic -> PartitionProduceResponse)."""
    for topic, parts in by_topic.items():
        for p in parts:
            if p.error_code:
                FAILED_PRODUCE.labels(str(topic)).inc()
                ERRORS.labels("Produce", error_info(p.error_code).name).inc()


def fetch_answered(topics: Sequence[FetchTopic], names: dict[int, str]) -> None:
    """Bytes out and errors of a Fetch response; names: topic number -> name when it was
    resolved (a topic id otherwise stands for itself)."""
    for i, t in enumerate(topics):
        name = names.get(i) or str(t.topic)
        out = 0
        for p in t.partitions:
            if p.error_code:
                FAILED_FETCH.labels(name).inc()
                ERRORS.labels("Fetch", error_info(p.error_code).name).inc()
            elif p.records:
                for r in p.records:
                    out += len(r)
        if out:
            BYTES_OUT.labels(name).inc(out)


# -- ownership ----------------------------------------------------------------------------------

LEASES_GAINED = Counter("quire_gateway_leases_gained", "Partition leases taken (a partition opened here)")
LEASES_LOST = Counter(
    "quire_gateway_leases_lost", "Partitions lost without handing them over (fenced by another owner, session lost)"
)
