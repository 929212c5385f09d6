"""Feedback while waiting: a live status line on a terminal, plain lines otherwise."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


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
    if status.message:
        parts.append(status.message)
    return "  ".join(parts)


class StatusLine:
    def __init__(self, stream: TextIO = sys.stderr, out: TextIO = sys.stdout, live: Optional[bool] = None):
        self.stream, self.out = stream, out
        self.live = stream.isatty() if live is None else live
        self._shown = ""
        self._last_key = None

    def update(self, status) -> None:
        key = (status.state, status.nodes_up, status.message)
        if self.live:
            self._shown = describe(status)
            self.stream.write("\r\033[K" + self._shown)
            self.stream.flush()
        elif key != self._last_key:
            self.stream.write(describe(status) + "\n")
            self.stream.flush()
        self._last_key = key

    def log(self, line: str) -> None:
        if self.live and self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
        self.out.write(line if line.endswith("\n") else line + "\n")
        self.out.flush()
        if self.live and self._shown:
            self.stream.write(self._shown)
            self.stream.flush()

    def close(self) -> None:
        if self.live and self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = ""
