"""``stall_timeout``: a node whose first rank printed nothing for that long is hung, and ends.

The launcher passes torchrun's standard output through ``StallWatch``: every line goes on to
the node's output as it came, and a line of this node's first rank (torchrun ``--tee`` tags it
``[default0]:``; on node 0 that is rank 0) is the sign of life.  The clock starts at that rank's
first line: before it, the interpreter imports torch, the ranks meet and the data loads, which
can take long on a busy node (``max_runtime`` bounds that part).  When no line came for the timeout,
every rank's Python stack is written into the log: ``py-spy dump`` of each worker where py-spy
is installed, then SIGABRT, which the workers' faulthandler (``PYTHONFAULTHANDLER=1``, set by the
launcher for every rank when a timeout is given: the interpreter installs the handler at start)
turns into every thread's traceback on the rank's stderr before it ends.  torchrun is then
stopped, and the node's last word is ``stalled: no output for 30m`` (``STALLED``): the
supervisors and the controller read that as a ``hang`` (cloudtrain.orchestrate.failures).

Standard library only, Python >= 3.8 (shipped to the nodes); Linux (``/proc``) to find the workers.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import BinaryIO, List, Optional

STALLED = "stalled: no output for %s"
RANK0_TAG = b"[default0]:"
DUMP_GRACE = 5.0  # seconds the workers get to write their stacks before torchrun is stopped


def shown(seconds: int) -> str:
    """``1800`` -> ``30m`` (as the job file says durations)."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append("%d%s" % (count, unit))
    return "".join(parts) or "0s"


def descendants(pid: int) -> List[int]:
    """Every process below ``pid`` (its workers, and theirs), from ``/proc``."""
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def dump_stacks(pid: int, out: BinaryIO) -> None:
    """Every Python process below ``pid``: its stacks into the log (py-spy, then faulthandler)."""
    workers = [p for p in descendants(pid) if _is_python(p)]
    spy = shutil.which("py-spy")
    for worker in workers:
        if spy:
            out.write(b"cloudtrain launch: py-spy dump of process %d\n" % worker)
            out.flush()
            try:
                subprocess.run([spy, "dump", "--pid", str(worker)], stdout=out, stderr=subprocess.STDOUT,
                               timeout=30, check=False)
            except (OSError, subprocess.SubprocessError):
                pass
    for worker in workers:
        try:
            os.kill(worker, signal.SIGABRT)  # faulthandler: every thread's stack, then the process ends
        except OSError:
            pass


def _is_python(pid: int) -> bool:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            first = f.read().split(b"\0", 1)[0]
    except OSError:
        return False
    return b"python" in os.path.basename(first)


class StallWatch:
    """Passes ``source`` (torchrun's stdout) to ``out`` line by line and ends ``proc`` when its
    first rank printed nothing for ``timeout`` seconds (``stalled`` then says so)."""

    def __init__(self, timeout: int, out: Optional[BinaryIO] = None, tag: bytes = RANK0_TAG):
        self.timeout, self.tag = int(timeout), tag
        self.out = out or sys.stdout.buffer
        self.last: Optional[float] = None  # the first rank's last line (None: it printed nothing yet)
        self.stalled = False
        self._done = threading.Event()

    @property
    def reason(self) -> str:
        return STALLED % shown(self.timeout)

    def start(self, source: BinaryIO, proc: subprocess.Popen) -> List[threading.Thread]:
        threads = [threading.Thread(target=self._pump, args=(source,), daemon=True),
                   threading.Thread(target=self._watch, args=(proc,), daemon=True)]
        for thread in threads:
            thread.start()
        return threads

    def _pump(self, source: BinaryIO) -> None:
        try:
            for line in iter(source.readline, b""):
                if line.startswith(self.tag):
                    self.last = time.monotonic()
                try:
                    self.out.write(line)
                    self.out.flush()
                except (OSError, ValueError):
                    pass
        finally:
            self._done.set()

    def _watch(self, proc: subprocess.Popen) -> None:
        while proc.poll() is None and not self._done.is_set():
            if self.last is None:
                self._done.wait(1.0)
                continue
            left = self.last + self.timeout - time.monotonic()
            if left > 0:
                self._done.wait(min(left, 1.0))
                continue
            self.stalled = True
            try:
                self.out.write(("cloudtrain launch: %s; every rank's Python stack follows\n" % self.reason)
                               .encode())
                self.out.flush()
            except (OSError, ValueError):
                pass
            dump_stacks(proc.pid, self.out)
            deadline = time.monotonic() + DUMP_GRACE
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except OSError:
                    pass
            return
