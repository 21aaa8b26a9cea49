"""Apache Kafka's jars from Maven Central: where they are cached and how to run its tools.

`compat_tests/java/install.sh` resolves the jars (and builds the harness's Java program);
this module finds them and runs Kafka's main classes with `java -cp`, since the shell scripts
of the Kafka distribution are not in the jars.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

DEFAULT_VERSION = "4.4.0"
INSTALL_SCRIPT = Path(__file__).resolve().parent.parent / "java" / "install.sh"

# The distribution's bin/*.sh names -> main classes. The broker is 4.4.0; the tools come from
# kafka-tools and kafka_2.13 4.3.1 (kafka-configs), on their own classpath (see java/install.sh).
TOOLS: dict[str, str] = {
    "kafka-server-start": "kafka.Kafka",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
}

# Short-lived tool JVMs: skip tiered JIT warm-up and keep the heap small (2 shared cores).
TOOL_JVM_OPTS: tuple[str, ...] = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Xms32m",
    "-Xmx512m",
    "-Djava.awt.headless=true",
)


def kafka_version() -> str:
    """The Kafka version the harness uses (env QUIRE_KAFKA_VERSION overrides the pin)."""
    return os.environ.get("QUIRE_KAFKA_VERSION", DEFAULT_VERSION)


def cache_dir() -> Path:
    """Where install.sh puts libs/, harness/ and log4j2.properties for this version."""
    override = os.environ.get("QUIRE_KAFKA_CACHE")
    if override:
        return Path(override)
    return Path.home() / ".cache" / "quire" / f"kafka-{kafka_version()}"


def libs_dir() -> Path:
    return cache_dir() / "libs"


def tools_libs_dir() -> Path:
    """kafka-tools 4.3.1 with its own dependencies (4.4.0 is not on Maven Central; see install.sh)."""
    return cache_dir() / "tools-libs"


def streams_libs_dir() -> Path:
    """kafka-streams 4.3.1 with its own 4.3.1 client (see install.sh)."""
    return cache_dir() / "streams-libs"


def streams_classpath() -> str:
    """The Streams application (compat_tests/java/streams-src) and kafka-streams' jars."""
    if not (streams_libs_dir() / ".complete").is_file():
        raise FileNotFoundError(f"kafka-streams jars not cached in {streams_libs_dir()}: run {INSTALL_SCRIPT}")
    jars = [str(p) for p in sorted(streams_libs_dir().glob("*.jar"))]
    return os.pathsep.join([str(cache_dir() / "streams-harness"), *jars])


# Main classes run on the broker's 4.4.0 classpath; every other TOOLS entry runs on tools-libs.
BROKER_CLASSES = frozenset({"kafka.Kafka", "kafka.tools.StorageTool"})


def uses_tools_libs(main_class: str) -> bool:
    """Kafka's command-line tools run on kafka-tools' own classpath (see tools_libs_dir)."""
    return main_class in TOOLS.values() and main_class not in BROKER_CLASSES


def harness_dir() -> Path:
    """Compiled classes of the harness's own Java program (compat_tests/java/src)."""
    return cache_dir() / "harness"


def log4j_config() -> Path:
    return cache_dir() / "log4j2.properties"


def is_installed() -> bool:
    return all((d / ".complete").is_file() for d in (libs_dir(), tools_libs_dir(), streams_libs_dir()))


def ensure_installed() -> None:
    """Run install.sh (idempotent; near-instant when the cache is complete and current)."""
    env = dict(os.environ, QUIRE_KAFKA_VERSION=kafka_version(), QUIRE_KAFKA_CACHE=str(cache_dir()))
    proc = subprocess.run(
        ["bash", str(INSTALL_SCRIPT)], env=env, capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{INSTALL_SCRIPT} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )


def kafka_classpath(*, harness: bool = False, tools: bool = False) -> str:
    """Classpath of every cached Kafka jar, or of kafka-tools' jars (plus the harness classes when
    asked)."""
    libs = tools_libs_dir() if tools else libs_dir()
    if not is_installed():
        raise FileNotFoundError(f"Kafka jars not cached in {libs}: run {INSTALL_SCRIPT}")
    entries = [str(p) for p in sorted(libs.glob("*.jar"))]
    if harness:
        entries.insert(0, str(harness_dir()))
    return os.pathsep.join(entries)


def java_command(
    main_class: str,
    args: Sequence[str] = (),
    *,
    jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
    harness: bool = False,
) -> list[str]:
    """argv for `java -cp <jars> <main_class> <args>`; main_class may be a TOOLS name."""
    cls = TOOLS.get(main_class, main_class)
    return [
        "java",
        *jvm_opts,
        f"-Dlog4j2.configurationFile={log4j_config()}",
        "-cp",
        kafka_classpath(harness=harness, tools=uses_tools_libs(cls)),
        cls,
        *args,
    ]


def run_tool(
    main_class: str,
    args: Sequence[str] = (),
    *,
    input: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
    harness: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run one Kafka tool to completion and capture its text output.

    `main_class` is a class name or a TOOLS key such as "kafka-topics". With `check`, a
    non-zero exit raises CalledProcessError whose message includes the tool's stderr.
    """
    cmd = java_command(main_class, args, jvm_opts=jvm_opts, harness=harness)
    proc = subprocess.run(
        cmd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **env) if env is not None else None,
        stdin=subprocess.DEVNULL if input is None else None,
    )
    if check and proc.returncode != 0:
        raise ToolError(proc, TOOLS.get(main_class, main_class))
    return proc


class ToolError(subprocess.CalledProcessError):
    """A Kafka tool exited non-zero; str() shows the command's tail of stdout and stderr."""

    def __init__(self, proc: subprocess.CompletedProcess[str], main_class: str) -> None:
        super().__init__(proc.returncode, proc.args, proc.stdout, proc.stderr)
        self.main_class = main_class

    def __str__(self) -> str:
        return (
            f"{self.main_class} exited {self.returncode}\n--- stdout ---\n{(self.stdout or '')[-3000:]}"
            f"\n--- stderr ---\n{(self.stderr or '')[-3000:]}"
        )
