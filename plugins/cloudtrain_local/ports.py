"""The ports a local job's nodes bind on 127.0.0.1: chosen outside the kernel's ephemeral range
(no outgoing connection can be handed one between the check and the bind), and a port that is
taken reported as such, naming its holder, before anything starts."""
from __future__ import annotations

import os
import secrets as _random
import socket
from typing import List, Optional

from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.spec.ports import HIGHEST_MASTER_PORT


EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
# Where a system says nothing (no /proc: macOS, Windows), the IANA dynamic range is the ephemeral one.
IANA_EPHEMERAL = (49152, 65535)
LOWEST_CHOSEN = 20000  # below: the ports of common services (databases, brokers) crowd


def ephemeral_range(path: str = EPHEMERAL_RANGE_FILE) -> tuple:
    """``(low, high)`` of the ports the kernel hands out to outgoing connections and ``bind(0)``."""
    try:
        with open(path, encoding="ascii") as f:
            low, high = (int(x) for x in f.read().split()[:2])
        return low, high
    except (OSError, ValueError):
        return IANA_EPHEMERAL


def free_port_block(count: int, start: int = LOWEST_CHOSEN, end: int = 65535) -> int:
    """A port ``p`` such that ``p .. p+count-1`` are all free on 127.0.0.1 right now, and all
    outside the ephemeral range: no outgoing connection of any process can be given one of them
    between this check and the node's own bind. ``p`` is a valid ``master_port`` (at most
    ``HIGHEST_MASTER_PORT``): what the chooser gives, a job file may name."""
    low, high = ephemeral_range()
    # the blocks that lie wholly below or above the ephemeral range: (first base, number of bases)
    spans = [(a, min(b - count + 1, HIGHEST_MASTER_PORT) - a + 1)
             for a, b in ((start, min(end, low - 1)), (max(start, high + 1), end))]
    spans = [(a, size) for a, size in spans if size > 0]
    if not spans:
        raise BadInput(f"no local ports outside the ephemeral range {low}-{high}; set providers.local.master_port")
    rng = _random.SystemRandom()
    sizes = [size for _a, size in spans]
    for _ in range(200):
        pick = rng.randrange(sum(sizes))
        for a, size in spans:
            if pick < size:
                base = a + pick
                break
            pick -= size
        if not any(port_in_use(port) for port in range(base, base + count)):
            return base
    raise BadInput("no free block of local ports found; set providers.local.master_port")


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Can nothing bind ``host:port`` now (a listener, or a connection bound to it)?"""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return False
    except OSError:
        return True
    finally:
        s.close()


def port_holder(port: int) -> Optional[int]:
    """The PID of a process with a TCP socket bound to ``port`` (Linux, a process this user may
    look at), else None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except (OSError, ValueError):
            continue
    inodes.discard("socket:[0]")  # TIME_WAIT entries belong to no process
    if not inodes:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
            except OSError:
                continue
    return None


def bound_ports(distribution: str, nodes: int, master_port: int) -> List[int]:
    """The ports on 127.0.0.1 that a local job's nodes bind: the master port (torchrun's store,
    DeepSpeed, Ray's GCS), the liveness port (+1, when node 0 runs a launcher the others wait
    for) and one port per ps-worker task (+2..)."""
    ports = [master_port] if distribution in ("ddp", "deepspeed", "ray") else []
    if nodes > 1 and distribution in ("mpi", "horovod", "ray"):
        ports.append(master_port + 1)
    if distribution == "ps-worker":
        ports += [master_port + 2 + i for i in range(nodes)]
    return ports


def check_ports_free(ports: List[int]) -> None:
    """A port a job must bind that is taken now is the machine's state, not a fault of the job
    file: refused up front (exit 3), naming the port and, where it can be known, its holder."""
    for port in ports:
        if port_in_use(port):
            pid = port_holder(port)
            holder = f" by pid {pid}" if pid else ""
            raise PlatformError(f"port {port} on 127.0.0.1 is in use{holder} (the machine's state, not the job "
                                "file's fault); stop what holds it, or set another providers.local.master_port "
                                "(or none: a free one is chosen)")
