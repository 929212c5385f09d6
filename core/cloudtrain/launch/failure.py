"""Which rank failed first, with what exit code, and the last lines of its error.

torchrun reports a failed rank as a ``ChildFailedError`` traceback and exits 1 (the rank's own
exit code is lost), and a SIGTERM as a ``SignalException`` traceback.  The launcher runs torchrun
through ``SHIM`` instead: the same ``torch.distributed.run`` (``parse_args`` then ``run``, as its
``main`` does), but the first failure is handed back to the launcher as JSON on a pipe and the
process exits with the failing rank's code; a signal ends it quietly once torchrun has stopped
its workers.  Once ``run`` has returned (the workers ended and reaped, the exit barrier passed),
the shim ends the way the interpreter always does (threads joined, ``atexit``, finalizers,
flushes), with one difference: the garbage ``run`` left is collected once, then what is still
alive is ``gc.freeze()``d, so that the shutdown's own collections skip the heap that importing
torch built.  They took 0.3-0.8 s of one core per node after the last worker had exited, time
every bare ``torchrun`` spends too (bench/: the launch-overhead rows).  That heap is frozen as
soon as torch is imported, so the collection at the end (and every full one while the job
runs) walks only what ``run`` made: ~2 ms instead of ~0.1 s.  What is still alive at the exit
(module globals) is left to the process's end, as ``os._exit`` would, but after ``atexit``;
Python never promises finalizers at exit.  The launcher then prints one summary
(``report_lines``) that supervisors read back (``parse``).  Standard library only, Python >= 3.8
(the shim itself runs in the job's Python, which has torch).
"""
from __future__ import annotations

import glob
import json
import os
import re
import sys
import time
from typing import Dict, List, Optional

RESULT_FD = "CLOUDTRAIN_RESULT_FD"
TAIL_LINES = 3

# Run as ``python -c SHIM TORCHRUN-ARGS``: no import of cloudtrain needed in the job's Python.
SHIM = r"""
import json, os, sys, tempfile
fd = int(os.environ.pop("CLOUDTRAIN_RESULT_FD"))
def report(**result):
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(result, f)
    except OSError:
        pass
sys.argv[0] = "torchrun"
try:
    from torch.distributed.run import parse_args, run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
except ImportError as e:
    sys.stderr.write("cloudtrain launch: torchrun: %s; install torch for %s\n" % (e, sys.executable))
    sys.exit(1)
try:
    from torch.distributed.elastic.multiprocessing.api import SignalException
except ImportError:
    SignalException = KeyboardInterrupt
import gc
gc.freeze()  # torch's modules live to the end: no collection walks them again (~0.1 s each)
args = parse_args(sys.argv[1:])
made = not getattr(args, "log_dir", None)
if made:
    args.log_dir = tempfile.mkdtemp(prefix="torchelastic_")
def end(code):
    # run's garbage is finalized now; the exit's collections then skip everything (~0.5 s)
    gc.collect()
    gc.freeze()
    sys.exit(code)
try:
    run(args)
except ChildFailedError as e:
    rank, failure = e.get_first_failure()
    code = failure.exitcode
    report(rank=rank, local_rank=failure.local_rank, exitcode=code, error_file=failure.error_file,
           log_dir=args.log_dir, made_log_dir=made)
    code = code if 0 < code < 256 else 128 - code if code < 0 else 1
except SignalException as e:
    report(signal=int(e.sigval), log_dir=args.log_dir, made_log_dir=made)
    code = 128 + int(e.sigval)
else:
    report(log_dir=args.log_dir, made_log_dir=made)
    code = 0
end(code)  # out of the except: its traceback (torchrun's frames) is garbage too by now
"""


def shim_argv(torchrun_argv: List[str], environ) -> Optional[List[str]]:
    """``torchrun_argv`` (``PY -m torch.distributed.run ...`` or ``torchrun ...``) run through
    ``SHIM`` in the same interpreter; None when that interpreter cannot be told (a ``torchrun``
    that is not a Python script)."""
    if torchrun_argv[1:3] == ["-m", "torch.distributed.run"]:
        return [torchrun_argv[0], "-c", SHIM] + torchrun_argv[3:]
    import shutil
    path = shutil.which(torchrun_argv[0], path=environ.get("PATH"))
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            first = f.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    # pip's console script: "#!/venv/bin/python" (or "#!/usr/bin/env python3")
    words = first[2:].split() if first.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
    if len(words) != 1 or not re.match(r"^(.*/)?python[\d.]*$", words[0]):
        return None
    return [words[0], "-c", SHIM] + torchrun_argv[1:]


def _last_lines(path: str, count: int) -> List[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return lines[-count:]


def error_tail(result: Dict, count: int = TAIL_LINES) -> List[str]:
    """The last lines of the failed rank's error: its error file (``TORCHELASTIC_ERROR_FILE``,
    written by a script under ``@record``) when there is one, else the rank's stderr, as
    torchrun's ``--log-dir`` keeps it (its stdout is no error: none then).  Every read of
    torchrun's files is here."""
    error_file = result.get("error_file") or ""
    if os.path.isfile(error_file):
        try:
            with open(error_file, encoding="utf-8") as f:
                data = json.load(f).get("message", {})
            if isinstance(data, dict):
                text = (data.get("extraInfo") or {}).get("py_callstack") or data.get("message") or ""
            else:
                text = str(data)
            lines = [line.rstrip() for line in text.splitlines() if line.strip()]
            if lines:
                return lines[-count:]
        except (OSError, ValueError, AttributeError):
            pass
    rank_dir = os.path.dirname(error_file) if os.path.isabs(error_file) else None
    if not rank_dir and result.get("log_dir") and result.get("local_rank") is not None:
        found = sorted(glob.glob(os.path.join(glob.escape(result["log_dir"]), "*", "attempt_*",
                                              str(result["local_rank"]))), key=os.path.getmtime)
        rank_dir = found[-1] if found else None
    if rank_dir:
        return _last_lines(os.path.join(rank_dir, "stderr.log"), count)
    return []


def exit_code_of(result: Dict) -> Optional[int]:
    code = result.get("exitcode")
    if code is None:
        return None
    return int(code) if code >= 0 else 128 - int(code)


# The launcher's summary of a failed node, read back by the local and Docker supervisors:
#   cloudtrain launch: rank 1 (local rank 0) failed first: exit code 7
#   cloudtrain launch: rank 1 | <one of the last lines of its error>
_FIRST = re.compile(r"^cloudtrain launch: rank (\d+) \(local rank (\d+)\) failed first: "
                    r"(?:exit code (\d+)|killed by signal (\d+))$")
_TAIL = re.compile(r"^cloudtrain launch: rank (\d+) \| (.*)$")


def report_lines(result: Dict) -> List[str]:
    """The launcher's words for the first failure torchrun saw (none for a clean end or a signal)."""
    if result.get("rank") is None or result.get("exitcode") is None:
        return []
    code = int(result["exitcode"])
    how = "exit code %d" % code if code >= 0 else "killed by signal %d" % -code
    lines = ["cloudtrain launch: rank %d (local rank %d) failed first: %s"
             % (result["rank"], result.get("local_rank") or 0, how)]
    lines += ["cloudtrain launch: rank %d | %s" % (result["rank"], line) for line in error_tail(result)]
    return lines


class FailureReader:
    """Collects what a node's launcher said about its failure, line by line."""

    def __init__(self):
        self.rank: Optional[int] = None
        self.how = ""
        self.tail: List[str] = []
        self.last_word = ""  # the launcher's last line of its own, e.g. a command not found
        self.at: Optional[float] = None  # monotonic time of the failure report

    def feed(self, line: str) -> None:
        if not line.startswith("cloudtrain launch: "):
            return
        line = line.rstrip("\n")
        first = _FIRST.match(line)
        tail = _TAIL.match(line)
        if first:
            self.rank = int(first.group(1))
            self.at = time.monotonic()
            self.how = "exited with code %s" % first.group(3) if first.group(3) else \
                "was killed by signal %s" % first.group(4)
            self.tail = []
        elif tail and self.rank is not None and int(tail.group(1)) == self.rank:
            self.tail.append(tail.group(2).strip())
        else:
            self.last_word = line[len("cloudtrain launch: "):]

    def reason(self, node: int) -> Optional[str]:
        """``node 1 rank 1 exited with code 7: <last lines>``, or the launcher's last word."""
        if self.rank is not None:
            text = "node %d rank %d %s" % (node, self.rank, self.how)
            return text + (": " + " | ".join(line[:200] for line in self.tail) if self.tail else "")
        return None


REASON_MAX = 1024  # characters a platform keeps of a failure reason (SageMaker's FailureReason: at most 1024)


def write_reason(path: str, text: str, hide=()) -> None:
    """A failed node's one-line reason at ``path``, where its platform reads it
    (``Topology.failure_file``), with each value of ``hide`` (the job's secrets, which a rank's last
    lines may echo) as ``***``.  Never over what is there already (the first word about a failure
    is the one that counts: a script may have written its own), never through a link; a node that
    cannot write it says why and goes on ending."""
    for value in sorted(hide, key=len, reverse=True):
        text = text.replace(value, "***")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        return
    except OSError as exc:
        print("cloudtrain launch: cannot write the failure reason to %s: %s" % (path, exc), file=sys.stderr)
        return
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(" ".join(text.split())[:REASON_MAX])
