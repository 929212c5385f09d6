"""A doorbell from a job's supervisor to the command that started it and follows its log.

The supervisor appends every line to ``job.log``; ``cloudtrain submit`` (without ``--detach``)
reads that file.  Polling it costs either latency (a line, and above all the job's last line,
waits for the next read) or wake-ups on a machine whose cores are training.  So the submitting
process keeps the read end of a pipe whose write end only the supervisor holds: the supervisor
writes a byte after each line it logs (``ring``), and the follower sleeps in ``select`` on the
pipe rather than for a fixed time (``Listener.wait``).  The supervisor's exit closes the pipe,
which wakes the follower too.

Nothing depends on the bell: a full pipe (the follower is behind) drops the byte, a follower
that has gone (``--detach``, Ctrl-C) makes ``ring`` a no-op, and a follower without a bell
(``cloudtrain logs -f`` from another shell) polls as before.
"""
from __future__ import annotations

import os
import select
from typing import Dict, Optional, Tuple

ENV = "CLOUDTRAIN_LOG_BELL_FD"  # the write end's number, in the supervisor's environment only


def pair(env: Dict[str, str]) -> Tuple[int, int]:
    """A new (read end, write end); ``env`` (the supervisor's) names the write end, which the
    caller passes to the supervisor (``pass_fds``) and then closes."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    env[ENV] = str(write_end)
    return read_end, write_end


class _End:
    """One end of the pipe: its descriptor while open, closed at most once."""

    def __init__(self, fd: Optional[int]):
        self.fd = fd

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError:
                pass


class Bell(_End):
    """The supervisor's end: ``ring`` after each line written."""

    @classmethod
    def from_environ(cls) -> "Bell":
        """The write end named in this process's environment (removed from it, and never
        inherited by what this process starts); a silent bell without one."""
        text = os.environ.pop(ENV, "")
        if not text.isdigit():
            return cls(None)
        fd = int(text)
        try:
            os.set_inheritable(fd, False)
            os.set_blocking(fd, False)
        except OSError:  # not open here (started by hand): no bell
            return cls(None)
        return cls(fd)

    def ring(self) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, b"\n")
        except BlockingIOError:  # the pipe is full: the follower has a wake-up pending already
            pass
        except OSError:  # nobody listens any more (EPIPE): stop ringing
            self.close()


class Listener(_End):
    """The follower's end: ``wait(timeout)`` returns when the bell rings, the supervisor has
    ended, or ``timeout`` seconds have passed."""

    @property
    def open(self) -> bool:
        return self.fd is not None

    def wait(self, timeout: float) -> None:
        if self.fd is None:
            select.select([], [], [], timeout)
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return
        try:
            while True:  # take every pending ring: one read of the file sees all their lines
                data = os.read(self.fd, 4096)
                if not data:  # the supervisor (the only writer) has ended
                    self.close()
                    return
        except BlockingIOError:
            return
