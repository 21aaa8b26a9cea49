"""store.net: free local ports for standalones, tests and benchmarks."""

from __future__ import annotations

import socket

from store.net import free_port, free_port_run


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
