"""The object-store interface offload needs, and its filesystem implementation.

Backends are synchronous (boto3 is); store/offload/tier.py runs them in a bounded thread pool
so the event loop never blocks on them. Keys are '/'-separated relative names."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    mtime_ms: int


class Backend(Protocol):
    driver: str

    def put_stream(self, key: str, parts: Iterable[bytes]) -> int:
        """Store the concatenated parts under key (multipart for large data); returns the size.
        The object appears whole or not at all."""
        ...

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object."""
        ...

    def size(self, key: str) -> int: ...

    def delete(self, key: str) -> None:
        """Remove the object; no error if it is already gone."""
        ...

    def list_objects(self, prefix: str) -> list[ObjectInfo]: ...

    def abort_incomplete(self, prefix: str, cutoff_ms: int) -> list[str]:
        """Abort uploads started before cutoff_ms and never completed (a crashed copy)."""
        ...

    def close(self) -> None: ...


class FsBackend:
    """Objects as files under a directory; writes go to a temporary name then are renamed, so a
    crash never leaves a partial object under its real name."""

    driver = "fs"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"bad object key {key!r}")
        return self.root / key

    def put_stream(self, key: str, parts: Iterable[bytes]) -> int:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        n = 0
        try:
            with open(tmp, "wb") as f:
                for part in parts:
                    f.write(part)
                    n += len(part)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fd = os.open(path.parent, os.O_RDONLY)  # the rename itself survives a crash
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return n

    def put(self, key: str, data: bytes) -> None:
        self.put_stream(key, [data])

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def get_range(self, key: str, start: int, end: int) -> bytes:
        with open(self._path(key), "rb") as f:
            f.seek(start)
            return f.read(max(0, end - start))

    def size(self, key: str) -> int:
        return self._path(key).stat().st_size

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                p = Path(dirpath) / name
                key = p.relative_to(self.root).as_posix()
                if not key.startswith(prefix):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = p.stat()
                    out.append(ObjectInfo(key, st.st_size, int(st.st_mtime * 1000)))
        return sorted(out, key=lambda o: o.key)

    def abort_incomplete(self, prefix: str, cutoff_ms: int) -> list[str]:
        return []  # a crashed copy leaves a temporary file, which list() shows

    def close(self) -> None:
        pass


def now_ms() -> int:
    return int(time.time() * 1000)
