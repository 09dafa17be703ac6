"""Count this process's TCP connections to a port (Linux /proc), for tests that
assert how many sockets a client opened."""

from __future__ import annotations

import os


def _socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def tcp_connections(port: int) -> int:
    """Established TCP connections of this process whose remote port is ``port``."""
    mine = _socket_inodes()
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            remote, state, inode = cols[2], cols[3], cols[9]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and inode in mine:
                count += 1
    return count
