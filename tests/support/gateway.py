"""pytest fixtures: a real `quire standalone` process (embedded meta, bookie children, gateway).

    def test_x(standalone):                   # function scope, 1 bookie, fresh data dir
        client = KafkaAdminClient(bootstrap_servers=standalone.bootstrap)
        standalone.stop()      # SIGTERM: clean shutdown (waits for the exit)
        standalone.start()     # again on the same data dir and port; returns once it answers
        standalone.kill()      # SIGKILL (its bookies get SIGTERM through PR_SET_PDEATHSIG)

    def test_y(standalone_factory):           # more control
        gw = standalone_factory(bookies=3, extra_args=[...])

`module_standalone` is one standalone shared by all tests of a module (faster; tests must use
their own topic names). Output goes to `<data_dir>.log`; `gw.output()` returns it.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from store.net import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))


def api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """True once the port answers an ApiVersions v0 request with error 0."""
    req = struct.pack(">hhih", 18, 0, 7, 5) + b"probe"
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(req)) + req)
            head = _recv_exact(s, 4)
            body = _recv_exact(s, struct.unpack(">i", head)[0])
            corr, err = struct.unpack_from(">ih", body, 0)
            return corr == 7 and err == 0
    except OSError:
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


class StandaloneGateway:
    def __init__(self, data_dir: Path, *, bookies: int = 1, port: int | None = None,
                 extra_args: list[str] | None = None, log_level: str = "INFO") -> None:
        self.data_dir = Path(data_dir)
        self.bookies = bookies
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.extra_args = list(extra_args or [])
        self.log_level = log_level
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
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
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def spawn(self) -> None:
        assert not self.alive, "already running"
        # Metrics off unless asked for: test processes must not compete for the fixed default port.
        metrics = [] if "--metrics" in self.extra_args else ["--metrics", "off"]
        cmd = [sys.executable, "-m", "quire", "--log-level", self.log_level, "standalone",
               "--data-dir", str(self.data_dir), "--host", self.host, "--port", str(self.port),
               "--bookies", str(self.bookies), *metrics, *self.extra_args]
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=_env(), cwd=ROOT)

    def wait_ready(self, within: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"standalone exited with {self.returncode}:\n{self.output()[-4000:]}")
            if api_versions_ok(self.host, self.port, timeout=1.0):
                return
            time.sleep(0.1)
        raise RuntimeError(f"standalone did not answer within {within} s:\n{self.output()[-4000:]}")

    def start(self) -> StandaloneGateway:
        """Start (again, on the same data dir and port) and wait until it answers."""
        self.spawn()
        self.wait_ready()
        return self

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM (clean shutdown) and wait; SIGKILL if it takes longer than `timeout`."""
        if self.alive:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.returncode

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.alive:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def pause(self) -> None:
        if self.alive:
            os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive:
            os.kill(self.pid, signal.SIGCONT)


StandaloneFactory = Callable[..., StandaloneGateway]


@pytest.fixture
def standalone_factory(tmp_path: Path) -> Iterator[StandaloneFactory]:
    started: list[StandaloneGateway] = []

    def make(*, bookies: int = 1, extra_args: list[str] | None = None, name: str | None = None) -> StandaloneGateway:
        gw = StandaloneGateway(tmp_path / (name or f"standalone-{len(started)}"), bookies=bookies,
                               extra_args=extra_args)
        started.append(gw)
        return gw.start()

    try:
        yield make
    finally:
        for gw in started:
            gw.stop(timeout=20.0)


@pytest.fixture
def standalone(standalone_factory: StandaloneFactory) -> StandaloneGateway:
    return standalone_factory()


def module_gateway(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Iterator[StandaloneGateway]:
    """A module's standalone, started with `args`, stopped after the module."""
    gw = StandaloneGateway(tmp_path_factory.mktemp("standalone") / "data", extra_args=list(args))
    try:
        yield gw.start()
    finally:
        gw.stop(timeout=20.0)


@pytest.fixture(scope="module")
def module_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    yield from module_gateway(tmp_path_factory)


class RawKafka:
    """A blocking raw-protocol connection for tests: send generated request objects (or any
    bytes) and read size-prefixed response frames."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str | None = "raw-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._corr = 0
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawKafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self, api_key: int, version: int, body: object, correlation_id: int | None = None,
              client_id: str | None = "raw-test") -> tuple[int, bytes]:
        """(correlation id, encoded frame with size prefix) for a request object."""
        from kafka_wire.frames import encode_request
        from kafka_wire.headers import RequestHeader

        if correlation_id is None:
            self._corr += 1
            correlation_id = self._corr
        header = RequestHeader(api_key=api_key, api_version=version, correlation_id=correlation_id,
                               client_id=client_id)
        return correlation_id, encode_request(header, body)  # type: ignore[arg-type]

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", _recv_exact(self.sock, 4))[0]
        return _recv_exact(self.sock, size)

    def request(self, api_key: int, version: int, body: object) -> object:
        """Send one request and decode its response (asserting the correlation id)."""
        from kafka_wire.frames import decode_response

        corr, data = self.frame(api_key, version, body, client_id=self.client_id)
        self.sock.sendall(data)
        got, resp = decode_response(api_key, version, self.recv_frame())
        assert got == corr, f"correlation id {got} != {corr}"
        return resp

    def closed_by_peer(self, within: float = 5.0) -> bool:
        """True if the server closes the connection (EOF or reset) within `within` seconds."""
        self.sock.settimeout(within)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
