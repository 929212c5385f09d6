"""A process is its PID *and* its start time: a stored PID is signalled only while both match.

Linux hands a PID out again once its process is gone (``pid_max`` is often 32768), so a PID
kept in the store or a run directory may name an unrelated process of the user by the time
``cancel``, ``status`` or ``release`` reads it.  The start time (``/proc/<pid>/stat`` field
22, clock ticks since boot) tells the two apart: it is kept beside every stored PID.
"""
from __future__ import annotations

import os
import signal
from typing import Optional


def start_time(pid: int) -> Optional[int]:
    """The start time of process ``pid`` in clock ticks since boot; None if there is none (or a zombie)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    # fields[0] is field 3 (state): field 22 (starttime) is fields[19]
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def same(pid: Optional[int], started: Optional[int]) -> bool:
    """True while the process that was ``pid`` started at ``started`` still runs."""
    return pid is not None and pid != 0 and started is not None and start_time(pid) == started


def signal_process(pid: Optional[int], started: Optional[int], sig: int) -> bool:
    """Send ``sig`` to ``pid`` only if it is still the process that started at ``started``."""
    if pid is None or not same(pid, started):
        return False
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_group(pgid: Optional[int], started: Optional[int], sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to the process group that the process ``pgid`` (started at ``started``) leads.

    The group is still ours if its leader is (PID and start time match), or if no process has
    the leader's PID: Linux does not hand out a PID while a group of that number has members, so
    members left behind by a dead leader keep the number theirs.  A process with that PID and
    another start time means the group is gone and the number is someone else's: nothing is sent."""
    if not pgid:
        return False
    now = start_time(pgid)
    if now is not None and now != started:
        return False
    if now is None and os.path.exists(f"/proc/{int(pgid)}") and not _zombie_of_group(pgid):
        return False  # unreadable, not ours to judge
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _zombie_of_group(pid: int) -> bool:
    """``pid`` is a zombie (or gone): its number still names its old group."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def adoptable_supervisor(pid: int, run_dir: str) -> bool:
    """``pid`` (stored without a start time) is a supervisor of the run in ``run_dir``: its
    command line is ``python -m <supervisor module> RUN_DIR``."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return start_time(pid) is not None and os.fsencode(run_dir) in argv


def adoptable_node(pid: int, supervisor: int) -> bool:
    """``pid`` (stored without a start time) is a child of the job's supervisor."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            return start_time(pid) is not None and int(f.read().rsplit(b")", 1)[1].split()[1]) == supervisor
    except (OSError, ValueError, IndexError):
        return False


PIDS_DIR = "pids"  # in a run dir: one file per process of the job, "PID START_TIME"


def record(run_dir, name: str, pid: int, started: Optional[int]) -> None:
    """Keep ``pid`` and its start time in the run directory too (``pids/<name>``)."""
    folder = os.path.join(str(run_dir), PIDS_DIR)
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{name}.tmp")
        with open(tmp, "w") as f:
            f.write(f"{pid} {'' if started is None else started}\n")
        os.replace(tmp, os.path.join(folder, name))
    except OSError:
        pass  # the store has it; the run dir's copy is for rebuilding a lost store

