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

from store.meta.paths import validate_node_path, validate_path


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
        """The current session's id (non-zero once started; 0 for a read-only embedded store,
        which opens none)."""

    @abc.abstractmethod
    def add_session_listener(self, listener: SessionListener) -> None:
        """Called once if the session is lost (expired, not merely closed by us)."""

    # The operations validate their path here, once for every implementation, and hand over to
    # the implementation's _-prefixed method (the same operation, path already valid).

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        """Data and stat of a node; NoNodeError if absent. The watch fires on change/delete."""
        return await self._get(validate_path(path), watch)

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        """Stat or None. The watch fires on create, change or delete."""
        return await self._exists(validate_path(path), watch)

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
        validate_node_path(path, "create", sequential=sequential)
        return await self._create(path, data, ephemeral, sequential, make_parents)

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace the data if the node's version equals `version` (-1: any)."""
        return await self._set(validate_path(path), data, version)

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete a node (versioned like set). recursive deletes the subtree first."""
        await self._delete(validate_node_path(path, "delete"), version, recursive)

    async def children(self, path: str, watch: Watcher | None = None) -> list[str]:
        """Names (not paths) of the children, sorted. The watch fires on add/remove of a
        child or deletion of the node."""
        return await self._children(validate_path(path), watch)

    @abc.abstractmethod
    async def _get(self, path: str, watch: Watcher | None) -> tuple[bytes, Stat]: ...

    @abc.abstractmethod
    async def _exists(self, path: str, watch: Watcher | None) -> Stat | None: ...

    @abc.abstractmethod
    async def _create(self, path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool) -> str: ...

    @abc.abstractmethod
    async def _set(self, path: str, data: bytes, version: int) -> Stat: ...

    @abc.abstractmethod
    async def _delete(self, path: str, version: int, recursive: bool) -> None: ...

    @abc.abstractmethod
    async def _children(self, path: str, watch: Watcher | None) -> list[str]: ...
