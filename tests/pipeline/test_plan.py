"""Planning of the `quire` data source without Spark: input partitions per ledger from offset
ranges (indexed and unindexed ledgers), timestamp pruning, maxOffsetsPerTrigger shares,
pushed-down filters, option parsing, and what a Spark worker imports."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

from pipeline.logs import LedgerSpan, PartitionState, plan_slices
from pipeline.options import OptionError, parse
from pipeline.source import Pruning, rate_limit
from store.offload import OffloadSettings


def state(spans: list[LedgerSpan], earliest: int = 0, latest: int = 100) -> PartitionState:
    return PartitionState("t", 0, "kafka/x/0", earliest, latest, spans)


SPANS = [
    LedgerSpan(1, 0, 40, 4000, 1_000),
    LedgerSpan(2, 40, 70, 3000, 2_000),
    LedgerSpan(3, None, None, 0, None),  # the owner's open ledger: not indexed yet
]


def test_one_slice_per_ledger_and_the_open_tail() -> None:
    got = plan_slices(state(SPANS), 0, 100, slice_bytes=1)
    assert [(s.start, s.end, s.ledgers) for s in got] == [(0, 40, (1,)), (40, 70, (2,)), (70, 100, (3,))]


def test_small_ledgers_merge_and_ranges_clip() -> None:
    got = plan_slices(state(SPANS), 10, 80, slice_bytes=10_000)
    assert [(s.start, s.end, s.ledgers) for s in got] == [(10, 80, (1, 2, 3))]
    assert [s.ledgers for s in plan_slices(state(SPANS), 45, 60)] == [(2,)]
    assert plan_slices(state(SPANS), 100, 100) == []


def test_timestamp_pruning_keeps_unknown_ledgers() -> None:
    got = plan_slices(state(SPANS), 0, 100, min_ts=1_500, slice_bytes=1)
    assert [s.ledgers for s in got] == [(2,), (3,)]


def test_unindexed_ledgers_between_indexed_ones_form_one_range() -> None:
    spans = [LedgerSpan(1, 0, 10, 10, None), LedgerSpan(2, None, None, 10, None),
             LedgerSpan(3, None, None, 10, None), LedgerSpan(4, 30, 50, 10, None)]
    got = plan_slices(state(spans, latest=50), 0, 50, slice_bytes=1)
    assert [(s.start, s.end, s.ledgers) for s in got] == [(0, 10, (1,)), (10, 30, (2, 3)), (30, 50, (4,))]


def test_rate_limit_shares_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 10}
    latest = {("t", 0): 90, ("t", 1): 40, ("t", 2): 5}  # partition 2 is new: from its start
    got = rate_limit({**start, ("t", 2): 0}, latest, 25)
    assert got == {("t", 0): 18, ("t", 1): 16, ("t", 2): 1}  # 25 offsets, 90:30:5 of the backlog
    assert rate_limit(start, {("t", 0): 5, ("t", 1): 12}, 100) == {("t", 0): 5, ("t", 1): 12}


def test_pruning_from_pushed_filters() -> None:
    p = Pruning()
    for f in [EqualTo(("partition",), 1), GreaterThanOrEqual(("offset",), 10), LessThan(("offset",), 30),
              In(("partition",), (1, 2)), GreaterThanOrEqual(("timestamp",), dt.datetime(2026, 1, 1)),
              EqualTo(("key",), b"x")]:
        p.add(f)
    assert p.partitions == {1}
    assert p.clip(0, 100) == (10, 30)
    assert p.min_ts == int(dt.datetime(2026, 1, 1).timestamp() * 1000)


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    """A standalone's data dir, as far as quire.meta looks (its metadata store's directory)."""
    (tmp_path / "meta").mkdir()
    return str(tmp_path)


def test_options(data_dir: str) -> None:
    o = parse({"quire.meta": data_dir, "SUBSCRIBE": "a, b", "startingOffsets": '{"a":{"0":-2,"1":7}}'},
              streaming=False)
    assert o.meta_url == f"embedded://{data_dir}/meta" and o.subscribe == ["a", "b"]
    assert o.starting == ("offsets", {("a", 0): -2, ("a", 1): 7}) and o.ending == ("latest",)
    s = parse({"quire.meta": "zk://h:1/q", "subscribePattern": "a.*", "maxOffsetsPerTrigger": "9"}, streaming=True)
    assert s.starting == ("latest",) and s.max_offsets_per_trigger == 9 and s.pattern is not None
    with pytest.raises(OptionError, match="endingOffsets"):
        parse({"quire.meta": data_dir, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="startingOffsetsByTimestampStrategy"):
        parse({"quire.meta": data_dir, "subscribe": "a", "startingOffsetsByTimestampStrategy": "x"}, streaming=False)
    with pytest.raises(OptionError, match="'assign'"):
        parse({"quire.meta": data_dir, "assign": "a"}, streaming=False)
    typo = Path(data_dir) / "typo"
    with pytest.raises(OptionError, match=r"'quire\.meta'.*typo"):
        parse({"quire.meta": str(typo), "subscribe": "a"}, streaming=False)
    assert not typo.exists()  # no empty metadata store made up for a mistyped path


def test_offload_options(data_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in [k for k in os.environ if k.startswith("QUIRE_")]:
        monkeypatch.delenv(k)
    # a standalone's data dir: its fs tier, as `quire admin --data-dir` finds it
    o = parse({"quire.meta": data_dir, "subscribe": "a"}, streaming=False)
    assert o.offload == OffloadSettings(driver="fs", directory=f"{data_dir}/offload")
    # a cluster: no tier unless configured; a server.properties, then options named as the settings
    assert parse({"quire.meta": "zk://h:1/q", "subscribe": "a"}, streaming=False).offload is None
    conf = tmp_path / "server.properties"
    conf.write_text("quire.offload.driver=s3\nquire.offload.s3.bucket=b\nquire.offload.s3.endpoint=http://x:1\n")
    s = parse({"quire.meta": "zk://h:1/q", "subscribe": "a", "quire.config": str(conf),
               "quire.offload.s3.bucket": "c", "quire.offload.s3.access.key": "k"}, streaming=False).offload
    assert s is not None and (s.driver, s.s3_endpoint, s.s3_bucket, s.s3_access_key) == ("s3", "http://x:1", "c", "k")
    assert parse({"quire.meta": data_dir, "subscribe": "a", "quire.offload.driver": "none"}, streaming=False).offload is None
    with pytest.raises(OptionError, match=r"quire\.offload\.nope"):
        parse({"quire.meta": data_dir, "subscribe": "a", "quire.offload.nope": "1"}, streaming=False)
    with pytest.raises(OptionError, match=r"quire\.offload\.driver"):
        parse({"quire.meta": data_dir, "subscribe": "a", "quire.offload.driver": "ftp"}, streaming=False)


def test_spark_workers_import_only_what_the_source_needs() -> None:
    """Spark runs planning (schema, reader, partitions) and tasks in short-lived Python workers
    that import pipeline.source; quire's settings, the coordinators, the admin snapshots and
    aiokafka's client are imported only where used (parsing the offload options, decoding)."""
    code = ("import sys, pipeline.source; print(' '.join(m for m in sys.modules if m == 'aiokafka'"
            " or m.split('.')[0] in ('quire', 'coordinator') or m.startswith('gateway.cluster')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    assert loaded.stdout.split() == []


def test_max_bytes_per_second_option(data_dir: str) -> None:
    o = parse({"quire.meta": data_dir, "subscribe": "a", "QUIRE.maxBytesPerSecond": "1048576"}, streaming=False)
    assert o.max_bytes_per_second == 1 << 20
    assert parse({"quire.meta": data_dir, "subscribe": "a"}, streaming=False).max_bytes_per_second is None
    with pytest.raises(OptionError, match=re.escape("'quire.maxBytesPerSecond', must be a positive integer")):
        parse({"quire.meta": data_dir, "subscribe": "a", "quire.maxBytesPerSecond": "fast"}, streaming=False)


def test_cpu_headroom_option(data_dir: str) -> None:
    o = parse({"quire.meta": data_dir, "subscribe": "a", "quire.cpuheadroom": "0.15"}, streaming=False)
    assert o.cpu_headroom == pytest.approx(0.15)
    assert parse({"quire.meta": data_dir, "subscribe": "a"}, streaming=False).cpu_headroom is None  # the default
    assert parse({"quire.meta": data_dir, "subscribe": "a", "quire.cpuHeadroom": "0"}, streaming=False).cpu_headroom == 0
    for bad in ("1", "-0.1", "lots"):
        with pytest.raises(OptionError, match=re.escape(f"Invalid value '{bad}' for option 'quire.cpuHeadroom'")):
            parse({"quire.meta": data_dir, "subscribe": "a", "quire.cpuHeadroom": bad}, streaming=False)
