"""Opening a metadata store from its URL: the one place that knows both implementations, kept
beside them so that the interface (api.py) does not import what implements it."""

from __future__ import annotations

from store.meta.api import MetaStore
from store.meta.embedded import EmbeddedMetaStore


def open_meta(url: str, *, session_timeout: float = 10.0, readonly: bool = False) -> MetaStore:
    """`embedded:///abs/dir` or `zk://host:port[,host:port]/chroot`. `readonly`: for a client
    that only reads; the embedded store then opens no session and takes no write lock (a
    ZooKeeper session is the server's to keep, and costs its readers no lock)."""
    if url.startswith("embedded://"):
        return EmbeddedMetaStore(url, session_timeout=session_timeout, readonly=readonly)
    if url.startswith("zk://"):
        # Imported here so that only processes given a zk:// URL load kazoo.
        from store.meta.zookeeper import ZkMetaStore

        return ZkMetaStore(url, session_timeout=session_timeout)
    raise ValueError(f"unknown metadata store URL {url!r}: expected embedded:///dir or zk://host:port/chroot")
