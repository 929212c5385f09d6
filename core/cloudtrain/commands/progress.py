"""Feedback while waiting: a live status line on a terminal, plain lines otherwise."""
from __future__ import annotations

import re
import sys
import time
from typing import List, Optional, TextIO

# C0 controls but tab and newline, DEL, and C1 controls (U+009B is a terminal's CSI, as ESC [ is)
_CONTROL = re.compile(r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _shown(match) -> str:
    c = match.group()
    if c == "\r\n" or c == "\r":  # a line end of Windows' / a progress bar's redraw: a line end
        return "\n"
    code = ord(c)
    return "^" + chr(code ^ 0x40) if code < 0x20 or code == 0x7F else f"<U+{code:04X}>"


def printable(text: str) -> str:
    """A job's output as a terminal may show it: every control character but newline and tab
    made visible (ESC as ``^[``), so nothing the job printed moves the cursor, clears the screen,
    retitles the window, writes to the clipboard (OSC 52) or hides a line; a carriage return
    ends a line.  The log files keep the bytes as the job wrote them."""
    return _CONTROL.sub(_shown, text)


def to_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _elapsed(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def describe(status, now: Optional[float] = None) -> str:
    now = time.time() if now is None else now
    parts = [status.handle, status.state.value]
    if status.started_at:
        parts.append(_elapsed((status.ended_at or now) - status.started_at))
    if status.nodes:
        parts.append(f"nodes {status.nodes_up or 0}/{status.nodes} up")
    if status.restarts:
        parts.append(f"restarts {len(status.restarts)}")
    if status.message:
        parts.append(printable(status.message))
    return "  ".join(parts)


def describe_restarts(status) -> List[str]:
    """One line per restart of the whole job: when and why."""
    return [f"  restart {r['attempt']}"
            + (f" at {time.strftime('%H:%M:%S', time.localtime(r['at']))}" if r.get("at") is not None else "")
            + f": {r['reason']}" for r in status.restarts]


class StatusLine:
    """The job's log lines on ``out`` and its state on ``stream`` (one live line on a terminal).

    A reader that goes away (``submit job.yaml | head -1``) closes the pipe: writing stops, the
    job is still followed to its end, and the command's exit code is still the job's."""

    def __init__(self, stream: TextIO = sys.stderr, out: TextIO = sys.stdout, live: Optional[bool] = None):
        self.stream, self.out = stream, out
        self.live = stream.isatty() if live is None else live
        self._shown = ""
        self._last_key: Optional[tuple] = None
        self.closed_pipes = 0

    def _write(self, which: str, text: str) -> None:
        f = getattr(self, which)
        try:
            f.write(text)
            f.flush()
        except BrokenPipeError:
            self.closed_pipes += 1
            setattr(self, which, _silence(f))
            if which == "stream":
                self.live = False

    def update(self, status, extra: str = "") -> None:
        """The status; ``extra`` (the job's progress, ``commands.jobprogress``) follows it on a
        terminal's live line."""
        key = (status.state, status.nodes_up, status.message)
        if self.live:
            self._shown = describe(status) + (f"  {extra}" if extra else "")
            self._write("stream", "\r\033[K" + self._shown)
        elif key != self._last_key:
            self._write("stream", describe(status) + "\n")
        self._last_key = key

    def note(self, text: str) -> None:
        """One line of cloudtrain's own on ``stream`` (not a terminal's live line: a plain line)."""
        self._write("stream", text + "\n")

    def log(self, line: str) -> None:
        """One line of the job's output (shown with ``printable`` on a terminal)."""
        if to_terminal(self.out):
            line = printable(line)
        if self.live and self._shown:
            self._write("stream", "\r\033[K")
        self._write("out", line if line.endswith("\n") else line + "\n")
        if self.live and self._shown:
            self._write("stream", self._shown)

    def close(self) -> None:
        if self.live and self._shown:
            self._write("stream", "\n")
            self._shown = ""


def _silence(f: TextIO) -> TextIO:
    """A sink for a stream whose reader is gone; its file descriptor is pointed at /dev/null too,
    so the interpreter's last flush at exit does not fail on it."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, f.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return open(os.devnull, "w")
