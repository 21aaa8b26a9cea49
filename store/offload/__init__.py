"""Tiered storage: closed ledgers copied whole to a filesystem directory or an S3-compatible
store, then read back from there (store/managed/reader.py picks the source by the ledger's
location in its segmented log's metadata).

- backend.py: the object-store interface and the filesystem backend; s3.py: boto3's.
- format.py: object names (ledger id + UUID per attempt) and the index object.
- tier.py: a backend in a bounded thread pool: copy + verify a ledger, read entries back.
- policy.py: which ledgers to offload and whose bookie copies may go.
- offloader.py: the owner-side driver (copy, verify, compare-and-set switch, bookie deletion
  after the lag), and the orphan cleanup pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from store.offload.backend import Backend, FsBackend
from store.offload.s3 import S3Backend
from store.offload.tier import Tier


@dataclass(frozen=True)
class OffloadSettings:
    driver: str = "fs"  # "fs", "s3" or "none"
    directory: str = ""  # fs: the directory (standalone: DATA_DIR/offload)
    s3_endpoint: str = ""
    s3_bucket: str = "quire-offload"
    s3_prefix: str = ""
    s3_region: str = ""
    s3_access_key: str = ""  # empty: boto3's usual chain (AWS_ACCESS_KEY_ID, profile, ...)
    s3_secret_key: str = ""
    concurrency: int = 8


def make_backend(s: OffloadSettings) -> Backend:
    if s.driver == "fs":
        if not s.directory:
            raise ValueError("offload driver fs needs a directory")
        return FsBackend(Path(s.directory))
    if s.driver == "s3":
        return S3Backend(
            s.s3_bucket,
            endpoint=s.s3_endpoint or None,
            prefix=s.s3_prefix,
            region=s.s3_region or None,
            access_key=s.s3_access_key or None,
            secret_key=s.s3_secret_key or None,
            max_connections=max(4, 2 * s.concurrency),
        )
    raise ValueError(f"unknown offload driver {s.driver!r} (fs, s3 or none)")


def make_tier(s: OffloadSettings) -> Tier | None:
    """The configured tier, or None when offload is off (driver "none")."""
    if s.driver == "none":
        return None
    return Tier(make_backend(s), concurrency=s.concurrency)
