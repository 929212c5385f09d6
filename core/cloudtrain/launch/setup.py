"""The job's ``setup:``: one shell command run once on every node, after the code arrives and
before the launcher starts the job's processes (``pip install -r requirements.txt``).

Standard library only (Python >= 3.8).  The command is one argument of ``sh -c``, never part of a
shell line cloudtrain builds; it runs in the node's working directory (the code) with the job's
environment.  Its output goes to the node's own output (the node's log) as it comes; when it
fails, the node fails with one line that says so and repeats the last thing it printed.
"""
from __future__ import annotations

import subprocess
import sys
from collections import deque
from typing import Mapping, Optional

from .parent import die_with_parent

SHELL = "/bin/sh"
TAIL_LINES = 3
TAIL_CHARS = 300


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
