"""`quire gateway` processes over a shared metadata store (embedded and ZooKeeper) and a real
bookie: node ids (allocated and stable, or --id), brokers list, clean SIGTERM exit."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_wire.messages.create_topics import CreateTopicsRequest
from kafka_wire.messages.metadata import MetadataRequest, MetadataResponse
from store.net import free_port
from tests.support.bookies import BookieCluster
from tests.support.gateway import ROOT, RawKafka, _env, api_versions_ok
from tests.support.metrics import scrape, value

pytestmark = pytest.mark.timeout(180)


class GatewayProc:
    def __init__(self, meta_url: str, log: Path, *extra: str) -> None:
        self.port = free_port()
        self.meta_url = meta_url
        self.log = log
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "quire",
            "--log-level",
            "INFO",
            "gateway",
            "--meta",
            self.meta_url,
            "--listen",
            self.bootstrap,
            "--replication",
            "1/1/1",
            *self.extra,
        ]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
        deadline = time.monotonic() + 60
        while not api_versions_ok("127.0.0.1", self.port, timeout=1.0):
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.1)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[list[GatewayProc]]:
    procs: list[GatewayProc] = []
    yield procs
    for g in procs:
        g.kill()


def _metadata(gw: GatewayProc, topics: list[str] | None = None) -> MetadataResponse:
    with RawKafka(gw.bootstrap) as c:
        req = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        resp = c.request(3, 12, req)
    assert isinstance(resp, MetadataResponse)
    return resp


async def test_gateway_processes(
    meta_url: str, bookie_cluster: BookieCluster, gateways: list[GatewayProc], tmp_path: Path
) -> None:
    await bookie_cluster(1, meta_url)
    first = GatewayProc(meta_url, tmp_path / "gw1.log")
    gateways.append(first)
    await asyncio.to_thread(first.start)
    md = await asyncio.to_thread(_metadata, first)
    assert [(b.node_id, b.port) for b in md.brokers] == [(1001, first.port)]  # allocated above 1000
    assert md.controller_id == 1001

    def create() -> int:
        with RawKafka(first.bootstrap) as c:
            resp = c.request(
                19,
                7,
                CreateTopicsRequest(
                    topics=[
                        CreateTopicsRequest.CreatableTopic(
                            name="cli-topic", num_partitions=2, replication_factor=-1
                        )
                    ]
                ),
            )
        return resp.topics[0].error_code  # type: ignore[attr-defined,no-any-return]

    assert await asyncio.to_thread(create) == 0
    assert await asyncio.to_thread(first.stop) == 0

    await asyncio.to_thread(first.start)  # same address: same node id, topics still there
    md = await asyncio.to_thread(_metadata, first, ["cli-topic"])
    assert [b.node_id for b in md.brokers] == [1001]
    assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [("cli-topic", 0, 2)]

    metrics_port = free_port()
    second = GatewayProc(meta_url, tmp_path / "gw2.log", "--id", "7", "--metrics", f"127.0.0.1:{metrics_port}")
    gateways.append(second)
    await asyncio.to_thread(second.start)
    deadline = time.monotonic() + 30
    while True:
        seen = [
            sorted(b.node_id for b in (await asyncio.to_thread(_metadata, g)).brokers)
            for g in (first, second)
        ]
        if seen == [[7, 1001], [7, 1001]] or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert seen == [[7, 1001], [7, 1001]]
    assert (await asyncio.to_thread(_metadata, second)).controller_id == 7
    scraped = await asyncio.to_thread(scrape, metrics_port)
    assert value(scraped, "kafka_network_requestmetrics_requests_total", request="Metadata", version="12") > 0
    assert await asyncio.to_thread(second.stop) == 0
    assert await asyncio.to_thread(first.stop) == 0
