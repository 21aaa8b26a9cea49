"""A real single-node Apache Kafka (KRaft, broker+controller in one JVM) on loopback ports,
from the jars compat_tests/java/install.sh caches: the reference for the differential runs
and the perf-tools benchmark.

    kafka = start_apache_kafka(tmp_dir)          # formats storage, starts, waits for it
    kafka.bootstrap                              # "127.0.0.1:<port>"
    kafka.stop()                                 # SIGTERM, SIGKILL after a timeout
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from compat_tests.support import kafka_dist
from store.net import free_port
from tests.support.gateway import api_versions_ok

START_TIMEOUT = 120.0

# Settings of a throwaway single node: replication 1 for internal topics, no group join delay,
# few offsets partitions (each costs a log on startup).
SINGLE_NODE_PROPS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "300",  # as the Quire targets' (FAST_GROUP_ENV)
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
}

# A short-lived test broker: small heap, serial GC. The benchmark passes its own options.
TEST_JVM_OPTS: tuple[str, ...] = ("-Xms256m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def _kafka_uuid() -> str:
    """A cluster id as Kafka prints them: 16 random bytes, URL-safe base64 without padding
    (it may start with "-": pass it as --cluster-id=ID)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ApacheKafka:
    def __init__(self, base_dir: Path, *, port: int | None = None,
                 props: Mapping[str, str] | None = None,
                 jvm_opts: tuple[str, ...] = TEST_JVM_OPTS) -> None:
        self.base_dir = Path(base_dir)
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.controller_port = free_port()
        self.jvm_opts = jvm_opts
        self.log_dir = self.base_dir / "logs"
        self.data_dir = self.base_dir / "data"
        self.config_path = self.base_dir / "server.properties"
        self.out_path = self.base_dir / "kafka.out"
        self.props = {
            **SINGLE_NODE_PROPS,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "log.dirs": str(self.data_dir),
            **(props or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        try:
            return self.out_path.read_text(errors="replace")
        except OSError:
            return ""

    def _java(self, main_class: str, args: list[str]) -> list[str]:
        return [
            "java", *self.jvm_opts,
            f"-Dkafka.logs.dir={self.log_dir}",
            f"-Dlog4j2.configurationFile={self.base_dir / 'log4j2.properties'}",
            "-cp", kafka_dist.kafka_classpath(), main_class, *args,
        ]

    def format(self) -> None:
        """Write server.properties and format the storage directory (once)."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        (self.base_dir / "log4j2.properties").write_text(
            "status = error\n"
            "appender.out.type = Console\nappender.out.name = OUT\n"
            "appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = warn\nrootLogger.appenderRef.out.ref = OUT\n"
            "logger.server.name = kafka.server.KafkaRaftServer\nlogger.server.level = info\n"
        )
        if (self.data_dir / "meta.properties").exists():
            return
        cmd = self._java("kafka.tools.StorageTool",
                         ["format", f"--cluster-id={_kafka_uuid()}", "-c", str(self.config_path)])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka storage format failed:\n{proc.stdout}\n{proc.stderr}")

    def start(self) -> ApacheKafka:
        """Format if needed, start `kafka.Kafka` and wait until it answers ApiVersions and has
        registered itself (Metadata lists a broker)."""
        assert not self.alive, "already running"
        self.format()
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", [str(self.config_path)]),
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"Apache Kafka exited with {self.proc.poll()}:\n{self.output()[-4000:]}")
            if api_versions_ok(self.host, self.port, timeout=1.0) and self._has_broker():
                return self
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"Apache Kafka did not answer within {START_TIMEOUT} s:\n{self.output()[-4000:]}")

    def _has_broker(self) -> bool:
        from kafka_wire.messages.metadata import MetadataRequest
        from tests.support.gateway import RawKafka

        try:
            with RawKafka(self.bootstrap, timeout=2.0) as raw:
                resp = raw.request(3, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
            return bool(resp.brokers)  # type: ignore[attr-defined]
        except OSError:
            return False

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (controlled shutdown) and wait; SIGKILL when it takes longer."""
        if self.alive:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()


def start_apache_kafka(base_dir: Path, *, props: Mapping[str, str] | None = None,
                       jvm_opts: tuple[str, ...] = TEST_JVM_OPTS) -> ApacheKafka:
    """Install the jars if needed, then format and start a single node under `base_dir`."""
    if not kafka_dist.is_installed():
        kafka_dist.ensure_installed()
    return ApacheKafka(base_dir, props=props, jvm_opts=jvm_opts).start()
