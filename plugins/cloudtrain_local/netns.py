"""A local job in its own network namespace: only a loopback interface, nothing reachable from
outside the machine (and no route out of it).

Open MPI's TCP transport and out-of-band channel and Ray's GCS, raylets and workers bind every
interface (``0.0.0.0`` / ``::``) whatever ``--mca *_if_include`` or ``--node-ip-address`` say, so
a local ``mpi``, ``horovod`` or ``ray`` job runs its supervisor, and so every node, under
``unshare --net`` (root) or ``unshare --user --map-root-user --net`` (user namespaces).  A new
namespace's ``lo`` is down: ``python -m cloudtrain_local.netns -- ARGV`` brings it up, then
execs ``ARGV``.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
from typing import List, Optional

# distributions whose servers cannot be told to listen on loopback only (docs/providers/local.md)
UNBOUNDED = ("mpi", "horovod", "ray")

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def unshare_argv() -> Optional[List[str]]:
    """The ``unshare`` command that gives a process its own network namespace here, or None
    when this machine does not let this user make one (no util-linux, user namespaces off)."""
    tool = shutil.which("unshare")
    if tool is None:
        return None
    argv = [tool, "--net"] if os.geteuid() == 0 else [tool, "--user", "--map-root-user", "--net"]
    try:
        ok = subprocess.run(argv + ["--", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return argv + ["--"] if ok else None


def isolating_prefix() -> List[str]:
    """``unshare ... -- python -m cloudtrain_local.netns --``: put before a command."""
    argv = unshare_argv()
    if argv is None:
        raise OSError("this machine does not let this user make a network namespace")
    return argv + [sys.executable, "-m", "cloudtrain_local.netns", "--"]


def entering_prefix(pid: int) -> List[str]:
    """``nsenter`` into the network namespace of process ``pid`` (the job's supervisor): put
    before a command that must see what the job's nodes see (``cloudtrain exec``)."""
    tool = shutil.which("nsenter")
    if tool is None:
        raise OSError("nsenter (util-linux) is not installed: cannot enter the job's network namespace")
    user = [] if os.geteuid() == 0 else ["--user", "--preserve-credentials"]
    return [tool, f"--target={int(pid)}", *user, "--net", "--"]


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))


def main(argv: List[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    loopback_up()
    os.execvp(argv[0], argv)
    return 127  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
