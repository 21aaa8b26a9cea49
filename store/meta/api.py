"""The metadata-store interface every store component talks to.

Modelled on ZooKeeper: a tree of nodes holding bytes, each with a version that increases on
every set; compare-and-set by version; ephemeral nodes tied to a session; sequential names;
one-shot watches. Implementations: `embedded://` (SQLite, several processes on one host) and
`zk://` (ZooKeeper through kazoo), opened by URL with store.meta.factory.open_meta. Paths are
absolute, '/'-separated, without a trailing '/'.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class MetaError(Exception):
    """Base of every metadata-store error."""


class NoNodeError(MetaError):
    """The node (or, on create, its parent) does not exist."""


class NodeExistsError(MetaError):
    """create() on a path that already exists."""


class BadVersionError(MetaError):
    """A compare-and-set or a versioned delete found another version."""


class NotEmptyError(MetaError):
    """delete() of a node that has children, without recursive=True."""


class SessionExpiredError(MetaError):
    """This client's session is gone: its ephemeral nodes were removed."""


class MetaConnectionError(MetaError):
    """The store cannot be reached (the operation may be retried)."""


@dataclass(frozen=True)
class Stat:
    version: int  # 0 after create, +1 on every set
    ephemeral_owner: int  # session id owning an ephemeral node; 0 for persistent nodes
    ctime_ms: int
    mtime_ms: int
    num_children: int


class EventType(Enum):
    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    CHILDREN = "children"  # a child was added or removed
    SESSION_LOST = "session_lost"  # delivered to watches pending when the session ends


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    path: str


# One-shot: fires at most once, with the first event after it was set. Called on the event
# loop that owns the store; it must not block (schedule work with create_task instead).
Watcher = Callable[[WatchEvent], None]
SessionListener = Callable[[], None]


class MetaStore(abc.ABC):
    """Async metadata store. Create with open_meta(url), then `await start()`."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect and open a session."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session (its ephemeral nodes go away) and release resources."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The current session's id (non-zero once started)."""

    @abc.abstractmethod
    def add_session_listener(self, listener: SessionListener) -> None:
        """Called once if the session is lost (expired, not merely closed by us)."""

    @abc.abstractmethod
    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        """Data and stat of a node; NoNodeError if absent. The watch fires on change/delete."""

    @abc.abstractmethod
    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        """Stat or None. The watch fires on create, change or delete."""

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node and return its path. Sequential appends a 10-digit zero-padded
        counter unique within the parent (as ZooKeeper). make_parents creates missing
        ancestors as empty persistent nodes. NodeExistsError / NoNodeError otherwise."""

    @abc.abstractmethod
    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace the data if the node's version equals `version` (-1: any)."""

    @abc.abstractmethod
    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete a node (versioned like set). recursive deletes the subtree first."""

    @abc.abstractmethod
    async def children(self, path: str, watch: Watcher | None = None) -> list[str]:
        """Names (not paths) of the children, sorted. The watch fires on add/remove of a
        child or deletion of the node."""

