"""The harness's Kafka Streams word count (compat_tests/java/streams-src, kafka-streams 4.3.1 on its
own classpath): run it as a background process whose events are read as they come, feed its
input, and read a topic's latest value per key."""

from __future__ import annotations

import collections
import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from compat_tests.support import kafka_dist

MAIN_CLASS = "quire.compat.streams.WordCount"


def _argv(command: str, args: Mapping[str, object]) -> list[str]:
    kafka_dist.ensure_installed()
    return ["java", *kafka_dist.TOOL_JVM_OPTS, f"-Dlog4j2.configurationFile={kafka_dist.log4j_config()}",
            "-cp", kafka_dist.streams_classpath(), MAIN_CLASS, command, *(f"{k}={v}" for k, v in args.items())]


def _events(proc: subprocess.CompletedProcess[str], command: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not events or events[-1]["event"] != "done":
        raise AssertionError(f"WordCount {command} exited {proc.returncode}: {events}\n{proc.stderr[-4000:]}")
    return events[:-1]


def produce_lines(bootstrap: str, topic: str, lines: Iterable[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    proc = subprocess.run(_argv("produce", {"bootstrap": bootstrap, "topic": topic}), input=text,
                          capture_output=True, text=True, timeout=180)
    _events(proc, "produce")


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", sequences: bool = False
               ) -> dict[str, Any]:
    """The "read" event: records, span (end - start offsets), latest (value per key) and, with
    `sequences`, values (every value per key in offset order)."""
    args = {"bootstrap": bootstrap, "topic": topic, "isolation": isolation, "sequences": str(sequences).lower()}
    proc = subprocess.run(_argv("read", args),
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    (event,) = _events(proc, "read")
    return event


def word_counts(lines: Iterable[str]) -> dict[str, int]:
    """What the application must output: its count per lower-cased word."""
    return dict(collections.Counter(w for line in lines for w in line.lower().split()))


class WordCountApp:
    """`WordCount run` in the background; stop() closes its stdin, which closes KafkaStreams."""

    def __init__(self, bootstrap: str, *, app_id: str, input: str, output: str, state_dir: Path,
                 **config: object) -> None:
        args: dict[str, object] = {"bootstrap": bootstrap, "app.id": app_id, "input": input,
                                   "output": output, "state.dir": state_dir, **config}
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr = Path(state_dir).with_suffix(".stderr")
        self._err = self._stderr.open("w")
        self.proc = subprocess.Popen(_argv("run", args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self._queue.put(json.loads(line))
        self._queue.put(None)

    def wait_for(self, event: str, timeout: float = 120.0, **fields: object) -> dict[str, Any]:
        """The first event so named (with these field values) since start, waiting for it."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e["event"] == event and all(e.get(k) == v for k, v in fields.items()):
                    return e
            try:
                new = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {event} {fields} within {timeout}s: {self.events}\n{self.stderr()}") from None
            if new is None:
                raise AssertionError(f"WordCount exited {self.proc.wait()} before {event}: {self.events}\n{self.stderr()}")
            self.events.append(new)

    def stderr(self) -> str:
        self._err.flush()
        return self._stderr.read_text()[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.wait_for("closed", timeout=90)
            self.proc.wait(timeout=30)
        self._err.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()
