"""Local ports: asking the OS for a free one (standalone bookies, tests, benchmarks).

At the root of `store/`, the lowest layer with I/O, so that the standalone gateway, the test
support and the benchmarks share this one copy."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it; a race with another process
    taking it before the caller binds is possible and accepted, as everywhere else)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
