"""`quire standalone` as an operator meets it, with real processes and real directories: the
ready line, one-line start-up errors that leave nothing behind, the data-dir lock, a `quire`
folder in the current directory, --help, and one configuration (file < environment < flags)
reported by DescribeConfigs with Kafka's sources."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from kafka_wire.messages.describe_configs import DescribeConfigsRequest
from store.net import free_port
from tests.support.gateway import ROOT, RawKafka, StandaloneGateway, _env

T = 30.0


def quire(*argv: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = T
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "quire", *argv], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=timeout)


def wait_output(gw: StandaloneGateway, text: str) -> str:
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        out = gw.output()
        if text in out:
            return out
        assert gw.alive, out[-3000:]
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not printed:\n{gw.output()[-3000:]}")


def test_ready_line_and_a_second_standalone_is_refused_at_once(tmp_path: Path) -> None:
    gw = StandaloneGateway(tmp_path / "data", log_level="WARNING")
    try:
        gw.start()
        out = wait_output(gw, "quire standalone ready:")
        line = next(x for x in out.splitlines() if "ready:" in x)
        assert gw.bootstrap in line and str(gw.data_dir.resolve()) in line and "1 bookie (E/WQ/AQ 1/1/1)" in line
        assert len(out.strip().splitlines()) == 1, out  # nothing else at the default level

        started = time.monotonic()
        second = quire("standalone", "--data-dir", str(gw.data_dir), "--port", str(free_port()))
        assert second.returncode == 2 and time.monotonic() - started < 10
        (err,) = second.stderr.strip().splitlines()
        assert "in use by another quire standalone" in err and f"pid {gw.pid}" in err
        assert gw.alive
    finally:
        gw.stop()


def test_port_in_use_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        got = quire("standalone", "--data-dir", str(tmp_path / "data"), "--port", str(port))
    assert got.returncode == 2
    (err,) = got.stderr.strip().splitlines()
    assert f"127.0.0.1:{port} is already in use" in err and "--listen" in err
    assert not (tmp_path / "data").exists()


def test_unusable_data_dirs_are_one_line_and_leave_nothing(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    got = quire("standalone", "--data-dir", str(a_file), "--port", str(free_port()))
    assert got.returncode == 2 and "is a file, not a directory" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and a_file.read_text() == "x"

    under_file = a_file / "data"
    got = quire("standalone", "--data-dir", str(under_file), "--port", str(free_port()))
    assert got.returncode == 2 and "cannot use data dir" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1

    # Unwritable even for root: a read-only bind is not at hand, but /proc refuses directories.
    got = quire("standalone", "--data-dir", "/proc/quire-data", "--port", str(free_port()))
    assert got.returncode == 2 and "cannot use data dir /proc/quire-data" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_quire_folder_in_the_current_directory_does_not_shadow_the_children(tmp_path: Path) -> None:
    (tmp_path / "quire").mkdir()  # e.g. starting from the clone's parent directory
    port = free_port()
    env = _env()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "quire", "standalone", "--data-dir", "data",
                             "--port", str(port)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the ready line, or the failure
        assert "quire standalone ready:" in line, line + proc.stdout.read() if proc.poll() is not None else line
        assert (tmp_path / "data" / "bookie-0").is_dir()
    finally:
        proc.terminate()
        proc.wait(T)
    assert proc.returncode == 0


def test_help_shows_every_option_with_help_and_default() -> None:
    got = quire("standalone", "--help")
    assert got.returncode == 0
    text = " ".join(got.stdout.split())
    for flag, default in (("--num-partitions", "default: 1"), ("--bookies", "default: 1"),
                          ("--data-dir", "default: ./quire-data"), ("--config", "FILE"),
                          ("--cache-mb", "default: 256"), ("--log-retention-ms", "default: 604800000")):
        assert flag in text and default in text, flag
    assert "QUIRE_NUM_PARTITIONS" in text


def test_unknown_config_key_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "server.properties"
    cfg.write_text("num.partitions=4\nnum.partitons=5\n")
    got = quire("standalone", "--config", str(cfg), "--data-dir", str(tmp_path / "d"), "--port", str(free_port()))
    assert got.returncode == 2 and "unknown setting 'num.partitons'" in got.stderr
    assert not (tmp_path / "d").exists()


def test_file_env_and_flags_reach_the_gateway_and_describe_configs(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    cfg = tmp_path / "server.properties"
    cfg.write_text(
        "# Kafka's names, Java properties syntax\n"
        "num.partitions = 4\n"
        "log.retention.ms: 3600000\n"
        "offsets.topic.num.partitions=2\n"
        "group.initial.rebalance.delay.ms=\\\n    0\n"
        "message.max.bytes=2000000\n"
    )
    os.environ["QUIRE_LOG_RETENTION_MS"] = "7200000"  # env beats the file
    try:
        gw = StandaloneGateway(tmp_path / "data", extra_args=["--config", str(cfg), "--message-max-bytes", "3000000"])
        gw.start()
    finally:
        del os.environ["QUIRE_LOG_RETENTION_MS"]
    try:
        admin = AdminClient({"bootstrap.servers": gw.bootstrap})
        res = ConfigResource(ResourceType.BROKER, "1")
        got = next(iter(admin.describe_configs([res]).values())).result(T)
        assert got["num.partitions"].value == "4"
        assert got["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        with RawKafka(gw.bootstrap) as raw:  # synonyms share a name: a client's dict would fold them
            res = raw.request(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=4, resource_name="1", configuration_keys=["num.partitions"])], include_synonyms=True))
        (entry,) = res.results[0].configs  # type: ignore[attr-defined]
        assert [(x.value, x.source) for x in entry.synonyms] == [
            ("4", ConfigSource.STATIC_BROKER_CONFIG.value), ("1", ConfigSource.DEFAULT_CONFIG.value)]
        assert got["log.retention.ms"].value == "7200000"
        assert got["message.max.bytes"].value == "3000000"
        assert got["offsets.topic.num.partitions"].value == "2"
        assert got["delete.topic.enable"].source == ConfigSource.DEFAULT_CONFIG.value
        assert got["quire.replication"].value == "1/1/1"

        # Auto-created topics get num.partitions; topic defaults follow the broker's.
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": gw.bootstrap})
        p.produce("auto-t", b"x")
        assert p.flush(T) == 0
        md = admin.list_topics("auto-t", timeout=T)
        assert len(md.topics["auto-t"].partitions) == 4
        tcfg = next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "auto-t")]).values())).result(T)
        assert tcfg["retention.ms"].value == "7200000"
        assert tcfg["max.message.bytes"].value == "3000000"
    finally:
        gw.stop()


@pytest.mark.parametrize("argv", [["admin", "--data-dir", "{d}", "bookies"], ["admin", "--data-dir", "{d}", "topics"]])
def test_a_bare_admin_noun_lists(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "meta").mkdir()
    got = quire(*[a.replace("{d}", str(tmp_path)) for a in argv])
    assert got.returncode == 0, got.stderr
    assert got.stdout.split()[0] in ("BOOKIE", "TOPIC")


def test_admin_reports_open_ledgers_live(tmp_path: Path) -> None:
    import json

    from confluent_kafka import Producer

    gw = StandaloneGateway(tmp_path / "data")
    gw.start()
    try:
        p = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        for i in range(1000):
            p.produce("live-t", f"m{i}".encode() * 10)
            p.poll(0)
        assert p.flush(T) == 0
        got = quire("admin", "--data-dir", str(gw.data_dir), "--json", "topics", "describe", "live-t")
        assert got.returncode == 0, got.stderr
        (part,) = json.loads(got.stdout)["partitions"]
        (ledger,) = part["ledgers"]
        assert ledger["state"] != "closed"  # the owner still writes it
        assert part["next_offset"] == 1000 and ledger["next_offset"] == 1000
        assert ledger["entries"] > 0 and part["size"] > 1000 * 20
        # Bookie disk use follows the data within a registration refresh.
        deadline = time.monotonic() + T
        while True:
            got = quire("admin", "--data-dir", str(gw.data_dir), "--json", "bookies")
            (bookie,) = json.loads(got.stdout)
            if bookie["disk_used_bytes"] > 1000 * 20 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert bookie["disk_used_bytes"] > 1000 * 20

        # The structured log events carry their fields (the standalone runs at INFO here).
        events = [json.loads(x) for x in gw.output().splitlines() if x.startswith("{")]
        gained = [e for e in events if e.get("event") == "lease_gained" and e.get("topic") == "live-t"]
        assert gained and gained[0]["partition"] == 0 and gained[0]["level"] == "info"

        # A group's offsets; describing it reads __consumer_offsets, with progress on a terminal
        # (stderr a pty) while stdout stays JSON.
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "live-g", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("live-t", 0, 600)], asynchronous=False)
        c.close()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's size
        try:
            proc = subprocess.run([sys.executable, "-P", "-m", "quire", "admin", "--data-dir", str(gw.data_dir),
                                   "--json", "groups", "describe", "live-g"], cwd=ROOT, env=_env(),
                                  stdout=subprocess.PIPE, stderr=slave, text=True, timeout=T)
            tty_text = b""
            while select.select([master], [], [], 0)[0]:  # everything the child wrote is buffered
                tty_text += os.read(master, 65536)
        finally:
            os.close(slave)
            os.close(master)
        assert proc.returncode == 0
        doc = json.loads(proc.stdout)
        (row,) = doc["partitions"]
        assert (row["committed_offset"], row["log_end_offset"], row["lag"]) == (600, 1000, 400)
        assert b"entries" in tty_text and b"__consumer_offsets" in tty_text
    finally:
        gw.stop()
