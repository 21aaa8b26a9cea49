"""`quire migrate`'s progress: JSON lines when its output is not a terminal, one human line per
topic (offsets, MB/s, ETA) when it is, and a last word on each topic when the round ends."""

from __future__ import annotations

import io
import json
import re

import pytest

from pipeline.migrate.copy import PartitionResult, PartitionTask
from pipeline.migrate.job import Progress, Round, _with_progress

NOWHERE = "127.0.0.1:1"  # the byte-size sample finds no source: progress counts offsets
TASKS = [PartitionTask("a", 0, NOWHERE, NOWHERE, 100), PartitionTask("a", 1, NOWHERE, NOWHERE, 60),
         PartitionTask("b", 0, NOWHERE, NOWHERE, 50)]
ROUND = Round(TASKS, {("a", 0): 0, ("a", 1): 20, ("b", 0): 10})  # resumed where Quire ended


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_json_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    p = Progress(ROUND, out)
    p.bytes_per_offset = {"a": 1e6}
    p.show({("a", 0): 50, ("a", 1): 40, ("b", 0): 10})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["event"], d["topic"], d["offsets"], d["total"]) for d in lines] == [
        ("progress", "a", 70, 140), ("progress", "b", 0, 40)]
    a, b = lines
    assert a["MBps"] > 0 and a["eta_s"] is not None and a["eta_s"] >= 0
    assert (b["MBps"], b["eta_s"]) == (0, None)  # nothing copied yet: no rate, no ETA


def test_one_line_per_topic_on_a_terminal() -> None:
    out = Terminal()
    p = Progress(ROUND, out)
    p.bytes_per_offset = {"a": 1e6}
    p.show({("a", 0): 100, ("a", 1): 60, ("b", 0): 30})
    lines = out.getvalue().split("\n")
    assert lines[-1] == "" and all(line.startswith("\r\x1b[K") for line in lines[:-1])  # each line redrawn
    assert re.fullmatch(r"a: 140/140 offsets, [0-9.]+ MB/s, ETA 0s", lines[0][4:]), lines
    assert re.fullmatch(r"b: 20/40 offsets, 0\.0 MB/s, ETA [0-9]+s", lines[1][4:]), lines


@pytest.mark.parametrize("out", [io.StringIO(), Terminal()])
def test_a_round_ends_with_each_topic_s_final_count(out: io.StringIO) -> None:
    done = [PartitionResult(t.topic, t.partition, ROUND.starts[(t.topic, t.partition)], t.stop, 1, 1, 0, 0.0, 0.0)
            for t in TASKS]
    assert _with_progress(ROUND, lambda: done, out) == done  # quicker than the first poll
    text = out.getvalue()
    assert "140/140" in text or '"offsets": 140, "total": 140' in text
    assert "40/40" in text or '"offsets": 40, "total": 40' in text
