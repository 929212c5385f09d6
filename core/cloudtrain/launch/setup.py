"""The job's ``setup:``: one shell command run once on every node, after the code arrives and
before the launcher starts the job's processes (``pip install -r requirements.txt``).

Standard library only (Python >= 3.8).  The command is one argument of ``sh -c``, never part of a
shell line cloudtrain builds; it runs in the node's working directory (the code) with the job's
environment.  Its output goes to the node's own output (the node's log) as it comes; when it
fails, the node fails with one line that says so and repeats the last thing it printed.

``once_per_node`` is the same for ranks that an MPI launcher started with no ``cloudtrain launch``
per node (Azure ML runs mpirun itself; every rank runs ``cloudtrain.launch.mpirank``): the node's
local rank 0 runs the setup, its output in that rank's output (the node's log), and records the
outcome in a marker file of this user's private directory under the node's temporary directory
(``private_dir``); the node's
other ranks wait for that marker (``SETUP_WAIT`` seconds at most) and fail with the same reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections import deque
from typing import Mapping, Optional

from .parent import die_with_parent

SHELL = "/bin/sh"
TAIL_LINES = 3
TAIL_CHARS = 300
# How long a node's other ranks wait for local rank 0's setup: pip installs that compile take tens
# of minutes.  mpirun ends every rank when one dies, so a rank 0 killed mid-setup ends the wait too.
SETUP_WAIT = 2 * 60 * 60
POLL = 0.2
# What names this run, then this start of it: Azure ML's run id (cloudtrain's job id elsewhere), and
# the launch's PMIx namespace, new at every mpirun, so a restarted job reruns setup.  The launcher's
# PMIx server gives every process it starts its namespace in PMIX_NAMESPACE (OpenPMIx's PMIx_Init
# reads it there, src/client/pmix_client.c); Open MPI 4 also sets OMPI_MCA_ess_base_jobid, the same job id.
RUN_IDS = (("AZUREML_RUN_ID", "CLOUDTRAIN_JOB_ID"), ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"))


def run_setup(command: str, env: Mapping[str, str], out=None) -> Optional[str]:
    """Run ``command`` through ``sh -c``; None when it succeeds, else why the node fails."""
    out = out or sys.stdout
    first = (command.strip().splitlines() or [""])[0]
    print("cloudtrain launch: running setup: %s" % first, file=out, flush=True)
    tail = deque(maxlen=TAIL_LINES)
    try:
        proc = subprocess.Popen([SHELL, "-c", command], env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
    except OSError as exc:
        return "setup could not start: %s" % exc
    with proc.stdout:
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace")
            out.write(line)
            out.flush()
            if line.strip():
                tail.append(line.strip())
    code = proc.wait()
    if code == 0:
        return None
    how = "exited with code %d" % code if code > 0 else "was killed by signal %d" % -code
    said = " | ".join(tail)
    if len(said) > TAIL_CHARS:
        said = "..." + said[-TAIL_CHARS:]
    return "setup %s%s" % (how, ": " + said if said else "")


def once_per_node(command: str, env: Mapping[str, str], out=None, wait: float = SETUP_WAIT) -> Optional[str]:
    """Run ``command`` once on this node for all its MPI ranks: local rank 0 (``LOCAL_RANK``, as
    ``mpirank`` exports it from ``OMPI_COMM_WORLD_LOCAL_RANK``, "the relative rank of this process
    on this node within its job": Open MPI's docs, tuning-apps/environment-var; a rank without one
    is alone on its node) runs it, the others wait for its outcome.  None when it succeeded, else why every rank of the node fails."""
    try:
        marker = marker_path(env)
    except OSError as exc:
        return "setup could not keep its outcome on this node: %s" % exc
    if env.get("LOCAL_RANK", "0") in ("", "0"):
        failed = run_setup(command, env, out)
        try:
            write_marker(marker, failed)
        except OSError as exc:
            return failed or "setup ran but could not tell this node's other ranks: %s" % exc
        return failed
    return wait_for_marker(marker, wait)


def marker_path(env: Mapping[str, str]) -> str:
    """This run's marker, in this user's private directory (``private_dir``)."""
    ids = [next((env[n] for n in names if env.get(n)), "") for names in RUN_IDS]
    return os.path.join(private_dir(), hashlib.sha256("\0".join(ids).encode()).hexdigest()[:32] + ".json")


def private_dir_path() -> str:
    """``cloudtrain-UID`` under the node's temporary directory: the one place where the launcher
    keeps what it makes outside the run's own directory (setup markers, a loopback job's
    ``sitecustomize``, DeepSpeed's hostfile)."""
    return os.path.join(tempfile.gettempdir(), "cloudtrain-%d" % os.getuid())


def private_dir() -> str:
    """``private_dir_path()``, made private (0700) when missing; OSError when it is not a directory
    of this user's only (another local user made it first, or planted a link there): nothing of
    this user's is read from it or written through it then."""
    directory = private_dir_path()
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError("%s is not a private directory of this user (another user made it, or it is a link, "
                      "or others may write in it)" % directory)
    return directory


def write_marker(path: str, failed: Optional[str]) -> None:
    """The outcome, written to a temporary file of the same directory and renamed over ``path``:
    a waiting rank reads all of it or nothing."""
    fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".partial-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"failed": failed}, f)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise


def wait_for_marker(path: str, wait: float) -> Optional[str]:
    """Local rank 0's outcome once its marker appears; after ``wait`` seconds, a failure."""
    deadline = time.monotonic() + wait
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            return "setup did not finish on this node's local rank 0 within %d s" % wait
        time.sleep(POLL)
    with open(path, encoding="utf-8") as f:
        return json.load(f)["failed"]
