"""The part of a job's log a person asks for: one node's or one rank's lines, those written since
a time, the last N (``cloudtrain logs --node --rank --since --tail``, issue 43).

A log's lines carry where they come from as a prefix: ``[node1/rank5] `` (the local and Docker
supervisors, ``cloudtrain.runtime.supervise.LogSink``), ``[node1] `` (a node's own line there, and
the pod logs of Kubernetes and the instance logs of ec2), ``[algo-2] `` (SageMaker's CloudWatch
stream of its second host).  ``[cloudtrain] `` lines are the supervisor's about the whole job: kept
by every filter.

A local or Docker job's log has no time on its lines; its supervisor keeps ``job.times`` beside
``job.log``: a line ``<seconds since the epoch> <byte offset>`` at most once a second, saying the
lines from that offset on were written at that time or later (``TimeIndex``).  ``--since`` reads
from the first offset written at or after the time asked for.
"""
from __future__ import annotations

import functools
import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Tuple

TIMES = "job.times"
JOB_NOTE = "[cloudtrain] "
PREFIX = re.compile(r"\[(?:node(\d+)(?:/rank(\d+))?|algo-(\d+))\] ")


@dataclass(frozen=True)
class LogSelection:
    """``node``/``rank``: only those lines; ``since``: seconds since the epoch; ``tail``: the last N."""
    node: Optional[int] = None
    rank: Optional[int] = None
    since: Optional[float] = None
    tail: Optional[int] = None

    @property
    def filters(self) -> bool:
        return self.node is not None or self.rank is not None

    @property
    def empty(self) -> bool:
        return not self.filters and self.since is None and self.tail is None

    def asked(self) -> List[str]:
        """The selectors asked for, by their option's name (``node``, ``rank``, ``since``)."""
        return [name for name in ("node", "rank", "since") if getattr(self, name) is not None]


def origin(line: str) -> Tuple[Optional[int], Optional[int]]:
    """(node, rank) a line's prefix names (SageMaker's ``algo-N`` is node N-1); (None, None) for none."""
    found = PREFIX.match(line)
    if not found:
        return None, None
    if found.group(3) is not None:
        return int(found.group(3)) - 1, None
    return int(found.group(1)), (int(found.group(2)) if found.group(2) is not None else None)


@functools.lru_cache(maxsize=64)
def _pattern(node: Optional[int], rank: Optional[int]):
    """The prefix of the lines of ``node`` and/or ``rank`` (one regex: a filter over a large log
    costs one match a line)."""
    if rank is not None:
        where = str(node) if node is not None else r"\d+"
        return re.compile(rf"\[node{where}/rank{rank}\] ")
    assert node is not None  # (matches asks only with a filter)
    return re.compile(rf"\[(?:node{node}(?:/rank\d+)?|algo-{node + 1})\] ")


def matches(line: str, selection: LogSelection) -> bool:
    if not selection.filters:
        return True
    return _pattern(selection.node, selection.rank).match(line) is not None or line.startswith(JOB_NOTE)


def select(lines: Iterable[str], selection: LogSelection) -> Iterator[str]:
    """The lines that match, the last ``tail`` of them (all of them read first) when asked."""
    kept = (line for line in lines if matches(line, selection))
    if selection.tail is None:
        yield from kept
    else:
        yield from deque(kept, maxlen=selection.tail) if selection.tail > 0 else ()


class TimeIndex:
    """``job.times`` written beside a log: at most one ``<time> <offset>`` line a second."""

    def __init__(self, path: Path, offset: int, clock=None):
        import time
        self.path, self.offset, self.clock = path, offset, clock or time.time
        self.last = 0
        self.file = open(path, "a", encoding="ascii", buffering=1)

    def before(self, data: str) -> None:
        """Called before ``data`` is appended to the log: note the time of its offset when a
        second has passed, then count its bytes."""
        now = int(self.clock())
        if now > self.last:
            self.last = now
            self.file.write(f"{now} {self.offset}\n")
        self.offset += len(data) if data.isascii() else len(data.encode("utf-8"))

    def close(self) -> None:
        self.file.close()


def offset_since(times: Path, since: float) -> Optional[int]:
    """The offset in the log from which every line was written at or after ``since``: the first
    entry at or after it; the log's end (None) when there is none (nothing written since); 0
    when ``times`` is missing (a log from before it: read whole)."""
    try:
        text = times.read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return 0
    for row in text.splitlines():
        at, _, offset = row.partition(" ")
        try:
            if float(at) >= since:
                return int(offset)
        except ValueError:
            continue
    return None


def lines_from(path: Path, start: int, end: int) -> Iterator[str]:
    """The lines of ``path`` between byte ``start`` and ``end``, oldest first."""
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            raw = f.readline(left)
            if not raw:
                return
            left -= len(raw)
            yield raw.decode("utf-8", "replace")


def lines_back(path: Path, start: int, end: int, block: int = 64 << 10) -> Iterator[str]:
    """The lines of ``path`` between byte ``start`` and ``end``, newest first (``--tail`` of a
    large log reads its end only)."""
    with open(path, "rb") as f:
        pos, rest = end, b""
        while pos > start:
            size = min(block, pos - start)
            pos -= size
            f.seek(pos)
            pieces = (f.read(size) + rest).split(b"\n")
            rest = pieces[0]
            for piece in reversed(pieces[1:]):
                if piece:
                    yield piece.decode("utf-8", "replace") + "\n"
        if rest:
            yield rest.decode("utf-8", "replace") + "\n"


def from_file(path: Path, selection: LogSelection) -> Tuple[Iterable[str], int]:
    """The selected lines of a local or Docker job's log so far and the offset they end at
    (a follower goes on from there)."""
    try:
        end = os.stat(path).st_size
    except FileNotFoundError:
        return [], 0
    start = 0
    if selection.since is not None:
        found = offset_since(path.parent / TIMES, selection.since)
        if found is None:
            return [], end
        start = min(found, end)
    if selection.tail is not None:
        picked: List[str] = []
        if selection.tail > 0:
            for line in lines_back(path, start, end):
                if matches(line, selection):
                    picked.append(line)
                    if len(picked) >= selection.tail:
                        break
        return picked[::-1], end
    return (line for line in lines_from(path, start, end) if matches(line, selection)), end
