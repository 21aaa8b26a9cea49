"""store.net: free local ports for standalones, tests and benchmarks; whether a host is this machine."""

from __future__ import annotations

import socket

from store.net import free_port, free_port_run, is_local_host


def test_free_port_can_be_bound() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))


def test_free_port_run_gives_n_bindable_ports_in_a_row() -> None:
    base = free_port_run(4)
    socks = [socket.socket() for _ in range(4)]
    try:
        for i, s in enumerate(socks):
            s.bind(("127.0.0.1", base + i))  # raises if any of the run is taken
    finally:
        for s in socks:
            s.close()


def test_is_local_host_knows_this_machine_from_others() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "[::1]", socket.gethostname()):
        assert is_local_host(host), host
    # this machine's own address, not a loopback one: the one a UDP socket "connected" out would use
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent
        own = s.getsockname()[0]
    assert is_local_host(own)
    # TEST-NET-3 (RFC 5737), never assigned to a machine; a name that cannot resolve
    for host in ("203.0.113.77", "no-such-host.invalid", ""):
        assert not is_local_host(host), host
