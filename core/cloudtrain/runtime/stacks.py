"""Every rank's Python stack, read from outside the rank (``cloudtrain stacks``, issue 43).

A node's processes as this machine sees them (a local node's launcher, a Docker node's first
process: ``HostedProvider.node_pids``) and those below it (``cloudtrain.launch.stall.descendants``,
the code that dumps a stalled node's stacks into its log); of those, the Python processes that
have a ``RANK`` (torchrun's workers, MPI's ranks through the launcher), else every Python one.
Each is read with ``py-spy dump``, which stops the process for a moment and lets it go on: the
job keeps running.  The rank is read from the process's own environment (``/proc/PID/environ``),
``RANK`` alone: nothing else of that environment (the job's secrets are in it) is read out.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import List, Optional, Tuple

DUMP_TIMEOUT = 30.0


def py_spy() -> Optional[str]:
    """py-spy's program: on PATH, else beside this interpreter (a venv's bin)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else None


def rank_of(pid: int) -> Optional[int]:
    """The ``RANK`` in process ``pid``'s environment, or None (none, or not readable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"RANK="):
                    value = item[5:]
                    return int(value) if value.isdigit() else None
    except OSError:
        return None
    return None


def ranks_below(pids: List[int]) -> List[Tuple[Optional[int], int]]:
    """``[(rank, pid)]`` of the Python processes at and below ``pids``, ranks in order; every
    Python process (rank None) when none of them has a rank."""
    from ..launch.stall import _is_python, descendants
    found: List[int] = []
    for pid in pids:
        for p in [pid, *descendants(pid)]:
            if p not in found and _is_python(p):
                found.append(p)
    ranked = [(rank_of(p), p) for p in found]
    with_rank = sorted(((r, p) for r, p in ranked if r is not None), key=lambda rp: (rp[0], rp[1]))
    # torchrun's agent has the node's env but no RANK; its workers each have one
    return list(with_rank) if with_rank else [(None, p) for p in found]


def dump(pid: int, spy: str) -> str:
    """``py-spy dump`` of ``pid``: its threads' stacks, innermost call first."""
    done = subprocess.run([spy, "dump", "--pid", str(pid)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=DUMP_TIMEOUT, check=False)
    return done.stdout.decode("utf-8", "replace")
