"""`quire migrate`: a PySpark job copying Kafka topics into Quire at their original offsets.

The driver plans with Kafka clients (confluent-kafka's admin on both sides: topics, configs,
consumer-group offsets) and the source's last stable offsets; one Spark task per partition
copies raw batches (pipeline/migrate/copy.py) to the partition's owner through Quire's internal
import, which needs the gateways started with quire.import.enable. A round copies up to the
offsets planned; a re-run resumes where each Quire partition ends; --follow repeats rounds
until stopped. Progress (offsets, MB/s, ETA per topic) goes to stderr, as JSON lines unless it
is a terminal, after a first line naming the Spark master, application and log file (the JVM's
output goes there, so stderr holds the job's lines alone); the summary and --verify's table to
stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from pipeline.kafka_client import LATEST, Connection, KafkaError
from pipeline.migrate.copy import PartitionResult, PartitionTask, copy_partition
from pipeline.migrate.verify import Digest, DigestTask, digest_partition

ADMIN_TIMEOUT_S = 30.0
PROGRESS_S = 2.0
LEADER_WAIT_S = 30.0
FOLLOW_IDLE_S = 2.0
_HOSTPORT = re.compile(r"^[^\s:/,]+:\d{1,5}$")


class MigrateError(Exception):
    """Bad input or a state the job cannot continue from: one line for the user."""


# ---- arguments ---------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="quire migrate",
        description="Copy Kafka topics into Quire at their original offsets, with consumer-group offsets "
        "(a PySpark job; the Quire gateways need quire.import.enable=true while it runs).")
    p.add_argument("--from", dest="source", required=True, metavar="BOOTSTRAP",
                   help="the Kafka cluster: host:port[,host:port...]")
    p.add_argument("--to", dest="dest", required=True, metavar="META_OR_BOOTSTRAP",
                   help="Quire: a gateway's host:port, zk://host:port/chroot or a standalone's data dir")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--topics", nargs="+", default=None, metavar="TOPIC", help="topics to copy (default: all)")
    which.add_argument("--pattern", default=None, help="regular expression of the topics to copy")
    p.add_argument("--groups", nargs="*", default=None, metavar="GROUP",
                   help="consumer groups whose committed offsets to copy (default: every group with offsets "
                   "on the copied topics; --groups alone: none)")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default: local[*])")
    p.add_argument("--follow", action="store_true", help="keep copying new records until interrupted")
    p.add_argument("--verify", action="store_true",
                   help="compare both sides per partition (records, chained hash); exit 1 on a mismatch")
    return p


@dataclass
class Options:
    source: str
    dest: str
    topics: list[str] | None = None
    pattern: str | None = None
    groups: list[str] | None = None
    master: str = "local[*]"
    follow: bool = False
    verify: bool = False


def _bootstrap(value: str, what: str) -> str:
    parts = [v.strip() for v in value.split(",") if v.strip()]
    if not parts or not all(_HOSTPORT.match(v) for v in parts):
        raise MigrateError(f"{what} {value!r} is not host:port[,host:port...]")
    return ",".join(parts)


def dest_bootstrap(value: str) -> str:
    """A Quire gateway address: given, or a live gateway of the metadata store given."""
    v = value.strip()
    if _HOSTPORT.match(v.split(",")[0]) and not os.path.isdir(v):
        return _bootstrap(v, "--to")
    if not v.startswith(("zk://", "embedded://")) and not os.path.isdir(os.path.join(v, "meta")):
        raise MigrateError(f"--to {value!r} is neither host:port, zk://host:port/chroot nor a standalone's data dir")
    from gateway.cluster.inspect import gateways
    from pipeline.options import meta_url
    from store.meta.factory import open_meta
    from store.tasks import run_async

    async def find() -> list[str]:
        meta = open_meta(meta_url(v))
        await meta.start()
        try:
            return [f"{g.host}:{g.port}" for g in await gateways(meta)]
        finally:
            await meta.close()

    try:
        found = run_async(find())
    except Exception as e:
        raise MigrateError(f"--to {value!r}: cannot read the metadata store ({e})") from None
    if not found:
        raise MigrateError(f"--to {value!r}: no live gateway is registered there")
    return ",".join(found)


# ---- the two clusters ----------------------------------------------------------------------


@dataclass
class TopicPlan:
    name: str
    partitions: int
    configs: dict[str, str]
    not_carried: dict[str, str] = field(default_factory=dict)


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    # librdkafka's own log lines through Python's logging (quire's JSON lines, WARNING and up)
    # rather than raw text on stderr, which carries the progress
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "quire-migrate",
                            "logger": logging.getLogger("pipeline.migrate.kafka")}
    return AdminClient(conf)


def _wait(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {k: f.result(ADMIN_TIMEOUT_S) for k, f in futures.items()}


def source_topics(admin: Any, opts: Options) -> list[TopicPlan]:
    from confluent_kafka.admin import ConfigResource, ConfigSource

    from gateway.topics.configs import TOPIC_CONFIGS

    md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    names = sorted(t for t in md.topics if not t.startswith("__"))
    if opts.topics is not None:
        missing = [t for t in opts.topics if t not in md.topics]
        if missing:
            raise MigrateError(f"no such topic on the source: {', '.join(missing)}")
        names = sorted(set(opts.topics))
    elif opts.pattern is not None:
        rx = re.compile(opts.pattern)
        names = [t for t in names if rx.fullmatch(t)]
    if not names:
        raise MigrateError("no topic to copy (the source has none matching)")
    res = _wait(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in names]))
    plans = []
    for r, entries in sorted(res.items(), key=lambda kv: kv[0].name):
        set_here = {k: e.value for k, e in entries.items()
                    if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None}
        plans.append(TopicPlan(r.name, len(md.topics[r.name].partitions),
                               {k: v for k, v in set_here.items() if k in TOPIC_CONFIGS},
                               {k: "Quire has no such topic config" for k in set_here if k not in TOPIC_CONFIGS}))
    return plans


def _reason(e: Exception) -> str:
    """confluent-kafka's KafkaException carries a KafkaError whose str() is the broker's message."""
    inner = e.args[0] if e.args else e
    return str(inner.str()) if hasattr(inner, "str") else str(inner)


def _drop_refused(admin: Any, plans: list[TopicPlan]) -> None:
    """Configs Quire refuses (a value outside its range, say) move to not_carried, each found
    by a validate-only CreateTopics of its own."""
    from confluent_kafka.admin import NewTopic

    for t in plans:
        for key, value in list(t.configs.items()):
            f = admin.create_topics([NewTopic(t.name, num_partitions=t.partitions, config={key: value})],
                                    validate_only=True, request_timeout=ADMIN_TIMEOUT_S)[t.name]
            try:
                f.result(ADMIN_TIMEOUT_S)
            except Exception as e:
                del t.configs[key]
                t.not_carried[key] = f"{key}={value} refused by Quire: {_reason(e)}"


def create_topics(admin: Any, plans: list[TopicPlan]) -> list[str]:
    """Create the topics Quire lacks; those it has must have the same partition count."""
    from confluent_kafka.admin import NewTopic

    md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    created: list[str] = []
    new: list[TopicPlan] = []
    for t in plans:
        have = md.topics.get(t.name)
        if have is not None and not have.error:
            if len(have.partitions) != t.partitions:
                raise MigrateError(f"topic {t.name} has {len(have.partitions)} partitions on Quire, "
                                   f"{t.partitions} on the source")
            continue
        new.append(t)
    _drop_refused(admin, new)
    if new:
        requests = [NewTopic(t.name, num_partitions=t.partitions, config=t.configs) for t in new]
        for name, f in admin.create_topics(requests, request_timeout=ADMIN_TIMEOUT_S).items():
            try:
                f.result(ADMIN_TIMEOUT_S)
            except Exception as e:
                raise MigrateError(f"creating topic {name} on Quire failed: {e}") from None
            created.append(name)
    return created


def _leaders(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], str]:
    last: Exception | None = None
    for address in bootstrap.split(","):
        try:
            with Connection(address) as c:
                return c.leaders(topics)
        except OSError as e:
            last = e
    raise MigrateError(f"cannot reach {bootstrap}: {last}")


def _ends(leaders: dict[tuple[str, int], str], *, committed: bool) -> dict[tuple[str, int], int]:
    by_leader: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for tp, address in leaders.items():
        by_leader[address].append(tp)
    out = {}
    for address, tps in by_leader.items():
        with Connection(address) as c:
            for t, p in tps:
                out[(t, p)] = c.list_offset(t, p, LATEST, committed=committed)
    return out


@dataclass
class Round:
    tasks: list[PartitionTask]
    starts: dict[tuple[str, int], int]  # where Quire ends before the round


def _all_leaders(bootstrap: str, plans: list[TopicPlan], side: str) -> dict[tuple[str, int], str]:
    """Every partition's leader, waiting LEADER_WAIT_S for those just created to get one."""
    deadline = time.monotonic() + LEADER_WAIT_S
    while True:
        leaders = _leaders(bootstrap, [t.name for t in plans])
        missing = [f"{t.name}-{p}" for t in plans for p in range(t.partitions) if (t.name, p) not in leaders]
        if not missing:
            return leaders
        if time.monotonic() > deadline:
            raise MigrateError(f"{missing[0]} has no leader on {side}")
        time.sleep(0.2)


def plan_round(source: str, dest: str, plans: list[TopicPlan]) -> Round:
    src, dst = _all_leaders(source, plans, "the source"), _all_leaders(dest, plans, "Quire")
    stops = _ends(src, committed=True)
    starts = _ends(dst, committed=False)
    tasks = [PartitionTask(t, p, src[(t, p)], dst[(t, p)], stops[(t, p)])
             for (t, p) in sorted(src) if stops[(t, p)] > starts[(t, p)]]
    return Round(tasks, starts)


def copy_groups(src_admin: Any, dst_admin: Any, topics: set[str], groups: list[str] | None) -> dict[str, int]:
    """Committed offsets of the groups on the copied topics, set on Quire (the same offsets
    name the same records there). Returns group -> partitions set."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    listed = src_admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S).result(ADMIN_TIMEOUT_S)
    known = sorted(g.group_id for g in listed.valid)
    if groups is not None:
        missing = [g for g in groups if g not in known]
        if missing:
            raise MigrateError(f"no such consumer group on the source: {', '.join(missing)}")
        known = sorted(set(groups))
    out: dict[str, int] = {}
    for g in known:
        res = src_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)])
        tps = res[g].result(ADMIN_TIMEOUT_S).topic_partitions or []
        keep = [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in tps
                if tp.topic in topics and tp.offset >= 0]
        if not keep:
            continue
        try:
            dst_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, keep)])[g].result(ADMIN_TIMEOUT_S)
        except Exception as e:
            raise MigrateError(f"setting the offsets of group {g} on Quire failed "
                               f"(is a consumer of it running there?): {e}") from None
        out[g] = len(keep)
    return out


# ---- progress ------------------------------------------------------------------------------


class Progress:
    """Per topic: offsets copied of the round's total, MB/s and ETA, from the Quire partitions'
    ends polled while the tasks run (MB from the source's bytes per offset, sampled)."""

    def __init__(self, rnd: Round, out: TextIO) -> None:
        self.out, self.tty = out, out.isatty()
        self.total: dict[str, int] = defaultdict(int)
        for task in rnd.tasks:
            self.total[task.topic] += task.stop - rnd.starts[(task.topic, task.partition)]
        self.rnd = rnd
        self.began = time.monotonic()
        self.bytes_per_offset: dict[str, float] = {}

    def show(self, ends: dict[tuple[str, int], int]) -> None:
        done: dict[str, int] = defaultdict(int)
        for task in self.rnd.tasks:
            key = (task.topic, task.partition)
            done[task.topic] += min(ends.get(key, 0), task.stop) - self.rnd.starts[key]
        elapsed = max(time.monotonic() - self.began, 1e-6)
        for topic, total in sorted(self.total.items()):
            n = max(done[topic], 0)
            rate = n / elapsed
            mbps = rate * self.bytes_per_offset.get(topic, 0.0) / 1e6
            eta = (total - n) / rate if rate > 0 else None
            if self.tty:
                eta_s = f"{eta:.0f}s" if eta is not None else "?"
                self.out.write(f"\r\x1b[K{topic}: {n}/{total} offsets, {mbps:.1f} MB/s, ETA {eta_s}\n")
            else:
                self.out.write(json.dumps({"event": "progress", "topic": topic, "offsets": n, "total": total,
                                           "MBps": round(mbps, 2), "eta_s": None if eta is None else round(eta, 1)})
                               + "\n")
        self.out.flush()


def _sample_bytes_per_offset(rnd: Round) -> dict[str, float]:
    """Bytes per offset of each topic, from one fetch of its first partition to copy."""
    from kafka_wire.records import iter_batches
    from kafka_wire.records.batch import last_complete_batch_end

    out: dict[str, float] = {}
    for task in rnd.tasks:
        if task.topic in out:
            continue
        try:
            with Connection(task.source) as c:
                got = c.fetch(task.topic, task.partition, rnd.starts[(task.topic, task.partition)], 1 << 20)
        except (OSError, KafkaError):
            continue  # no estimate: progress shows offsets only
        data = got.records[: last_complete_batch_end(got.records)]
        spans = [(b.base_offset, b.last_offset) for b in iter_batches(data)]
        if spans:
            out[task.topic] = len(data) / max(spans[-1][1] + 1 - spans[0][0], 1)
    return out


def _with_progress(rnd: Round, run: Callable[[], list[PartitionResult]], out: TextIO) -> list[PartitionResult]:
    progress = Progress(rnd, out)
    progress.bytes_per_offset = _sample_bytes_per_offset(rnd)
    dest = {(t.topic, t.partition): t.dest for t in rnd.tasks}
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(PROGRESS_S):
            try:
                progress.show(_ends(dest, committed=False))
            except Exception:  # progress is best effort; the tasks report their own errors
                pass

    th = threading.Thread(target=poll, name="migrate-progress", daemon=True)
    th.start()
    try:
        results = run()
    finally:
        stop.set()
        th.join()
    if rnd.tasks:  # the last word on each topic (a round shorter than PROGRESS_S showed none)
        progress.show({(r.topic, r.partition): r.end for r in results})
    return results


# ---- the job -------------------------------------------------------------------------------


def _error_lines(e: Exception) -> list[str]:
    """The `SomeError: message` lines of a Spark error (JVM and Python tracebacks in one text)."""
    return [ln.strip() for ln in str(e).splitlines() if re.match(r"^\s*[\w.$]+(Error|Exception): ", ln)]


def _spark(master: str) -> tuple[Any, str]:
    """A session on `master`, and the file its JVM writes its output to (Spark's log), so that
    stderr carries the job's progress alone (JSON lines unless a terminal) and errors stay one line."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = (SparkConf().setMaster(master).setAppName("quire-migrate").set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false").set("spark.python.worker.reuse", "true"))
    fd, log = tempfile.mkstemp(prefix="quire-migrate-spark-", suffix=".log")
    with os.fdopen(fd, "wb") as jvm_out:
        try:
            sc = SparkContext(conf=conf, gateway=launch_gateway(conf, popen_kwargs={"stdout": jvm_out,
                                                                                   "stderr": jvm_out}))
        except Exception as e:  # a bad --master fails in the JVM: its first exception says why
            with open(log, errors="replace") as f:
                why = _java_reason(f.read()) or _java_reason(str(e)) or str(e).splitlines()[0]
            raise MigrateError(f"--master {master!r}: Spark did not start: {why} (Spark's log: {log})") from None
    return SparkSession(sc), log


_JAVA_EXCEPTION = re.compile(r"(?:^|[\s:])(?:[\w$]+\.)+[\w$]*(?:Error|Exception): (.+)$", re.MULTILINE)


def _java_reason(text: str) -> str | None:
    """The message of the first Java exception in a log or a Py4J error (spark-submit refusing
    a master exits with it in its output; SparkContext refusing one raises it through Py4J)."""
    m = _JAVA_EXCEPTION.search(text)
    return m.group(1).strip() if m else None


def announce(spark: Any, out: TextIO, log: str | None = None) -> None:
    """Which Spark runs the job (the master it was given, the application to look for there)
    and where its log goes."""
    sc = spark.sparkContext
    if out.isatty():
        out.write(f"Spark master {sc.master}, application {sc.applicationId}"
                  + (f", log {log}" if log else "") + "\n")
    else:
        out.write(json.dumps({"event": "spark", "master": sc.master, "app_id": sc.applicationId, "log": log}) + "\n")
    out.flush()


def _run_tasks(spark: Any, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    if not items:
        return []
    try:
        return spark.sparkContext.parallelize(items, len(items)).map(fn).collect()
    except Exception as e:  # Spark's error carries the task's traceback: its last line says what failed
        lines = _error_lines(e)
        raise MigrateError(f"a Spark task failed: {lines[-1] if lines else e}") from e


def probe_imports(rnd: Round) -> None:
    """Every Quire owner the round writes to accepts imports (an empty one is refused for being
    empty when imports are on, and for being an import when they are off)."""
    from kafka_wire.errors import ErrorCode

    seen: set[str] = set()
    for task in rnd.tasks:
        if task.dest in seen:
            continue
        seen.add(task.dest)
        with Connection(task.dest) as c:
            try:
                c.import_batches(task.topic, task.partition, b"")
            except KafkaError as e:
                if e.code != ErrorCode.INVALID_RECORD:
                    raise MigrateError(f"Quire gateway {task.dest}: {e}") from None


@dataclass
class Summary:
    topics: list[TopicPlan]
    created: list[str]
    results: list[PartitionResult]
    groups: dict[str, int]
    seconds: float

    @property
    def records(self) -> int:
        return sum(r.records for r in self.results)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.results)

    @property
    def mbps(self) -> float:
        return self.bytes / 1e6 / max(self.seconds, 1e-6)

    def lines(self) -> Iterable[str]:
        for t in self.topics:
            rs = [r for r in self.results if r.topic == t.name]
            note = " (created)" if t.name in self.created else ""
            yield (f"{t.name}{note}: {t.partitions} partitions, {sum(r.records for r in rs)} records, "
                   f"{sum(r.bytes for r in rs) / 1e6:.1f} MB copied, {sum(r.skipped for r in rs)} "
                   "batches left out (transaction markers, aborted)")
            for key, why in sorted(t.not_carried.items()):
                yield f"  config {key} not carried: {why}"
        for g, n in sorted(self.groups.items()):
            yield f"group {g}: committed offsets of {n} partitions copied"
        fetch = sum(r.fetch_s for r in self.results)
        imp = sum(r.import_s for r in self.results)
        yield (f"copied {self.records} records, {self.bytes / 1e6:.1f} MB in {self.seconds:.1f} s "
               f"({self.mbps:.1f} MB/s; task time: fetching {fetch:.1f} s, importing {imp:.1f} s)")


def migrate_round(spark: Any, opts: Options, dest: str, out: TextIO) -> Summary:
    began = time.monotonic()
    src_admin, dst_admin = _admin(opts.source), _admin(dest)
    plans = source_topics(src_admin, opts)
    created = create_topics(dst_admin, plans)
    rnd = plan_round(opts.source, dest, plans)
    probe_imports(rnd)
    results = _with_progress(rnd, lambda: _run_tasks(spark, copy_partition, rnd.tasks), out)
    groups = copy_groups(src_admin, dst_admin, {t.name for t in plans}, opts.groups)
    return Summary(plans, created, results, groups, time.monotonic() - began)


def verify(spark: Any, opts: Options, dest: str, plans: list[TopicPlan]) -> tuple[list[str], bool]:
    """Both sides per partition up to where Quire ends: (table lines, all equal)."""
    names = [t.name for t in plans]
    ends = _ends(_leaders(dest, names), committed=False)
    src_ends = _ends(_leaders(opts.source, names), committed=True)
    tasks = [DigestTask(side, bs, t, p, ends[(t, p)]) for (t, p) in sorted(ends)
             for side, bs in (("source", opts.source), ("dest", dest))]
    got: dict[tuple[str, str, int], Digest] = {(d.side, d.topic, d.partition): d
                                               for d in _run_tasks(spark, digest_partition, tasks)}
    lines = [f"{'partition':<32} {'records':>9} {'quire':>9} {'end':>9} {'source end':>10}  result"]
    ok = True
    for t, p in sorted(ends):
        s, d = got[("source", t, p)], got[("dest", t, p)]
        same = (s.records, s.last_offset, s.sha256) == (d.records, d.last_offset, d.sha256)
        behind = src_ends[(t, p)] > ends[(t, p)]
        ok = ok and same
        verdict = "ok" if same else "MISMATCH"
        if behind:
            verdict += f" (source has {src_ends[(t, p)] - ends[(t, p)]} more offsets: not copied yet)"
        lines.append(f"{f'{t}-{p}':<32} {s.records:>9} {d.records:>9} {ends[(t, p)]:>9} {src_ends[(t, p)]:>10}  "
                     f"{verdict}")
    return lines, ok


def run(opts: Options, *, spark: Any = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
        stop: threading.Event | None = None) -> int:
    """The job; `spark`: a session to use (default: one on opts.master); `stop` ends --follow."""
    source = _bootstrap(opts.source, "--from")
    opts.source = source
    if opts.pattern is not None:
        try:
            re.compile(opts.pattern)
        except re.error as e:
            raise MigrateError(f"--pattern {opts.pattern!r} is not a regular expression: {e}") from None
    dest = dest_bootstrap(opts.dest)
    if spark is None:
        spark, log = _spark(opts.master)
        announce(spark, err, log)
    stop = stop or threading.Event()
    summary = migrate_round(spark, opts, dest, err)
    for line in summary.lines():
        print(line, file=out)
    while opts.follow and not stop.is_set():
        if stop.wait(FOLLOW_IDLE_S):
            break
        more = migrate_round(spark, opts, dest, err)
        if more.results:
            for line in more.lines():
                print(line, file=out)
    if opts.verify:
        lines, ok = verify(spark, opts, dest, summary.topics)
        for line in lines:
            print(line, file=out)
        if not ok:
            print("verify: mismatch", file=out)
            return 1
        print("verify: every partition matches", file=out)
    return 0


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    opts = Options(args.source, args.dest, args.topics, args.pattern, args.groups, args.master, args.follow,
                   args.verify)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    from confluent_kafka import KafkaException

    try:
        return run(opts, stop=stop)
    except MigrateError as e:
        print(f"quire migrate: {e}", file=sys.stderr)
        return 2
    except (KafkaException, OSError) as e:
        print(f"quire migrate: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
