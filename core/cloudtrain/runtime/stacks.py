"""Every rank's Python stack, read from outside the rank (``cloudtrain stacks``, issue 43).

A node's processes as this machine sees them (a local node's launcher, a Docker node's first
process: ``HostedProvider.node_pids``) and those below it (``cloudtrain.launch.stall.descendants``,
the code that dumps a stalled node's stacks into its log); of those, the Python processes that
have a ``RANK`` (torchrun's workers, MPI's ranks through the launcher), else every Python one.
Each is read with ``py-spy dump``, which stops the process for a moment and lets it go on: the
job keeps running.  Without py-spy, a rank whose launcher armed faulthandler on a signal
(``CLOUDTRAIN_STACKS_SIGNAL``, a local job's ``sitecustomize``: ``cloudtrain.launch.loopback_site``)
and that catches it (``SigCgt`` of ``/proc/PID/status``) is sent that signal: it writes its
stacks to its stderr, which is the node's log, and goes on; those lines are read back from the
log.  A rank that has not armed it is never signalled (the signal's default would end it).
The rank and the signal are read from the process's own environment (``/proc/PID/environ``),
those variables alone (``RANK``, ``RANK_MARKS``, ``CLOUDTRAIN_STACKS_SIGNAL``), each only tested
or parsed as a number: nothing else of it (the job's secrets are in it) is read out.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import List, Optional, Tuple

DUMP_TIMEOUT = 30.0


def py_spy() -> Optional[str]:
    """py-spy's program: ``$CLOUDTRAIN_PY_SPY`` (empty: none, faulthandler only), else on PATH,
    else beside this interpreter (a venv's bin)."""
    if "CLOUDTRAIN_PY_SPY" in os.environ:
        return os.environ["CLOUDTRAIN_PY_SPY"] or None
    found = shutil.which("py-spy")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else None


def _environ_value(pid: int, name: str) -> Optional[str]:
    """One variable of process ``pid``'s environment (as it started), or None."""
    key = name.encode() + b"="
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(key):
                    return item[len(key):].decode("ascii", "replace")
    except OSError:
        return None
    return None


def rank_of(pid: int) -> Optional[int]:
    """The ``RANK`` in process ``pid``'s environment, or None (none, or not readable)."""
    value = _environ_value(pid, "RANK")
    return int(value) if value is not None and value.isdigit() else None


def armed_signal(pid: int) -> Optional[int]:
    """The signal process ``pid`` answers with its stacks (faulthandler, armed by the launcher's
    site), or None: named in its ``CLOUDTRAIN_STACKS_SIGNAL`` and caught (``SigCgt``)."""
    import signal
    name = _environ_value(pid, "CLOUDTRAIN_STACKS_SIGNAL") or ""
    sig = getattr(signal, name, None) if name.startswith("SIGUSR") else None
    if sig is None:
        return None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            caught = next((int(line.split()[1], 16) for line in f if line.startswith("SigCgt:")), 0)
    except (OSError, ValueError):
        return None
    return int(sig) if caught & (1 << (int(sig) - 1)) else None


FAULTHANDLER_WAIT = 5.0  # seconds the ranks get to write their stacks into the log


def by_signal(ranks: List[Tuple[Optional[int], int]], log, wait: float = FAULTHANDLER_WAIT) -> Tuple[dict, list]:
    """Signal each armed rank (``armed_signal``) and read what it wrote from ``log`` (the job's
    ``job.log``): ``({rank: [lines]}, [(rank, pid) not armed])``.  A rank's lines are those of
    ``[node<i>/rank<r>]`` written after the signal, until each has written its stacks' end (the
    line after the last ``File ...``) or ``wait`` has passed."""
    import os as _os
    import time
    from .logselect import origin
    armed = [(r, p, armed_signal(p)) for r, p in ranks if r is not None]
    sent = [(r, p, sig) for r, p, sig in armed if sig is not None]
    skipped = [(r, p) for r, p in ranks if (r, p) not in [(a, b) for a, b, _ in sent]]
    start = _os.stat(log).st_size if _os.path.exists(log) else 0
    for _, pid, sig in sent:
        try:
            _os.kill(pid, sig)
        except OSError:
            pass
    found: dict = {r: [] for r, _, _ in sent}
    before: dict = {}
    deadline = time.monotonic() + wait
    # done once every signalled rank has written a frame and nothing more came for a moment
    while sent and time.monotonic() < deadline and not (found == before and all(map(_has_frame, found.values()))):
        before = found
        time.sleep(0.3)
        found = {r: [] for r, _, _ in sent}
        with open(log, "rb") as f:
            f.seek(start)
            for raw in f.read().decode("utf-8", "replace").splitlines():
                rank = origin(raw)[1]
                if rank in found:
                    found[rank].append(raw.split("] ", 1)[1] if "] " in raw else "")
    return found, skipped


def _has_frame(lines: List[str]) -> bool:
    """Whether faulthandler's dump has begun: a ``  File "...", line N in FUNCTION`` line."""
    return any(line.lstrip().startswith("File ") for line in lines)


def dump_lines(lines: List[str]) -> List[str]:
    """faulthandler's dump out of a rank's lines: from its first thread header to its last frame."""
    heads = [i for i, line in enumerate(lines) if line.startswith(("Current thread 0x", "Thread 0x"))]
    frames = [i for i, line in enumerate(lines) if line.lstrip().startswith("File ")]
    if not heads or not frames:
        return []
    return lines[heads[0]:frames[-1] + 1]


# set in a rank's own environment by what starts the ranks (torchrun: GROUP_RANK and LOCAL_RANK;
# Open MPI, MPICH/Hydra: theirs), never only in the node's: a platform's RANK alone (Kubeflow's
# per pod) also reaches the launcher and torchrun's agent, which are no ranks
RANK_MARKS = ("GROUP_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def ranks_below(pids: List[int]) -> List[Tuple[Optional[int], int]]:
    """``[(rank, pid)]`` of the ranks at and below ``pids``, in rank order: the Python processes
    with a ``RANK`` and one of ``RANK_MARKS``, the first (outermost) of each rank (a rank's
    forked data-loader workers share its environment); every Python process (rank None) when
    none is a rank."""
    from ..launch.stall import _is_python, descendants
    found: List[int] = []
    for pid in pids:
        for p in [pid, *descendants(pid)]:  # parents before their children
            if p not in found and _is_python(p):
                found.append(p)
    ranks: dict = {}
    for p in found:
        rank = rank_of(p)
        if rank is not None and rank not in ranks and any(_environ_value(p, m) is not None for m in RANK_MARKS):
            ranks[rank] = p
    return sorted(ranks.items()) if ranks else [(None, p) for p in found]


def dump(pid: int, spy: str) -> str:
    """``py-spy dump`` of ``pid``: its threads' stacks, innermost call first."""
    done = subprocess.run([spy, "dump", "--pid", str(pid)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=DUMP_TIMEOUT, check=False)
    return done.stdout.decode("utf-8", "replace")
