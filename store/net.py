"""Local ports: asking the OS for a free one (standalone bookies, tests, benchmarks); whether a
host names this machine.

At the root of `store/`, the lowest layer with I/O, so that the standalone gateway, the test
support and the benchmarks share this one copy."""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["free_port", "free_port_run", "is_local_host"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it; a race with another process
    taking it before the caller binds is possible and accepted, as everywhere else)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_port_run(n: int, host: str = "127.0.0.1") -> int:
    """A port P with P .. P+n-1 all free right now: a standalone's metrics port and its bookies'
    (each bookie serves its metrics on the port after the last). Same race as free_port."""
    for _ in range(50):
        base = free_port(host)
        if base + n > 65536:
            continue
        socks: list[socket.socket] = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind((host, p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no run of {n} free ports on {host}")


def is_local_host(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 in brackets or not) names this machine: one of
    its addresses is a loopback one, or one this machine can bind (binding another machine's
    address fails). False for a name that does not resolve."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, sockaddr in infos:
        try:
            if ipaddress.ip_address(sockaddr[0]).is_loopback:
                return True
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((sockaddr[0], 0, *sockaddr[2:]))
            return True
        except (OSError, ValueError):
            continue
    return False
