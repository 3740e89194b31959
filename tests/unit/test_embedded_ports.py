"""The embedded servers' ports sit below the kernel's ephemeral range: a server restarted
on its port must find it free, and a client reconnecting to a port inside that range can
be handed it as its own source port and connect to itself."""

from __future__ import annotations

import socket

from govindex.devstack.embedded import _ephemeral_low, free_port


def test_free_ports_are_below_the_ephemeral_range_and_free() -> None:
    low = _ephemeral_low()
    for _ in range(50):
        port = free_port()
        assert 1024 <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: a server can take it
