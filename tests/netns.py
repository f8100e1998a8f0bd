"""Two test hosts on one machine: network namespaces joined by a veth pair.

Each host has its own network stack (its own loopback, ports and one veth interface on
10.231.N.0/24), so processes in different hosts talk over a real link, as two VMs do.
Creating namespaces needs root (CAP_SYS_ADMIN) and iproute2; :func:`two_hosts` yields
``None`` where the machine does not allow it, and tests fall back to plain loopback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Host:
    """One namespace-host.

    Attributes:
        namespace: The network namespace's name.
        interface: Its veth interface.
        address: Its IPv4 address on the link.
    """

    namespace: str
    interface: str
    address: str

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside this host's network namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextmanager
def two_hosts() -> Iterator[tuple[Host, Host] | None]:
    """Creates two namespace-hosts joined by a veth pair, and removes them afterwards.

    Yields:
        The two hosts, or ``None`` where namespaces cannot be made here.
    """
    tag = f"{os.getpid() % 100000}"
    subnet = f"10.231.{os.getpid() % 250}"
    hosts = (
        Host(f"lc{tag}a", f"lcv{tag}a", f"{subnet}.1"),
        Host(f"lc{tag}b", f"lcv{tag}b", f"{subnet}.2"),
    )
    if shutil.which("ip") is None:
        yield None
        return
    made: list[str] = []
    try:
        for host in hosts:
            _ip("netns", "add", host.namespace)
            made.append(host.namespace)
        _ip("link", "add", hosts[0].interface, "type", "veth", "peer", "name", hosts[1].interface)
        for host in hosts:
            _ip("link", "set", host.interface, "netns", host.namespace)
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
            _ip("-n", host.namespace, "link", "set", host.interface, "up")
            _ip("-n", host.namespace, "link", "set", "lo", "up")
    except subprocess.CalledProcessError:
        for namespace in made:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        yield None
        return
    try:
        yield hosts
    finally:
        for namespace in made:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
