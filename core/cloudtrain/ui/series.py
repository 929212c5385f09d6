"""A job's metrics over steps and time, for the dashboard's charts: bounded, whatever the log's size.

Read from the same report lines ``status`` reads (``cloudtrain.runtime.progress.parse_line``:
rank 0's ``CLOUDTRAIN_PROGRESS`` lines, Hugging Face Trainer's log dicts, ``epoch N/M`` and
``step N/M`` lines; a metric whose name looks like a secret is dropped there), but every line
of the log, oldest first, not only its tail.

Bounded: each metric keeps at most ``2 * MAX_POINTS`` points in memory (when it has that many,
every other one is dropped and from then on only every ``stride``-th new one is kept) and a
job's answer has at most ``MAX_POINTS`` per metric (evenly spaced, the newest always among
them), ``MAX_METRICS`` metrics at most.  A local or docker job's log is read once: the next
question reads only what was written since (``Tail``), so a chart open on a job with 100,000
reports costs a small read every few seconds; and once every metric keeps only every n-th
point, only every n-th report line is parsed (``Series.skip``).

Attempts: the supervisor's own line ``[cloudtrain] ...; restarting every node (restart N of M)``
starts attempt N of a local or docker job; in a log without it (a platform that restarts the job
itself), a step lower than the one before starts a new attempt.  A job the controller follows
(``plans``/``attempts`` in the store) has one log per attempt: each is read in turn.
"""
from __future__ import annotations

import os
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ..launch.report import PREFIX
from ..runtime.progress import MAX_LINE, _rank_zero_text as rank_zero_text, parse_line

MAX_POINTS = 1000
MAX_METRICS = 32
CHUNK = 1 << 20
RESTART_NOTE = re.compile(r"\[cloudtrain\] .*restarting every node \(restart (\d+) of \d+\)")
# logs whose reading state is kept between questions (the least recent goes): at most
# CACHED_LOGS x MAX_METRICS x 2 x MAX_POINTS points, a few MB for the usual handful of metrics
CACHED_LOGS = 16
REMOTE_TTL = 15.0  # seconds a cloud job's series is reused before its logs are read again

Point = Tuple[Optional[float], Optional[float], Optional[float], int]  # (x, time, value, attempt)


class Thinned:
    """The points of one metric, at most ``2 * limit`` kept (see the module's docstring)."""

    def __init__(self, limit: int = MAX_POINTS):
        self.limit, self.stride, self.seen = limit, 1, 0
        self.points: List[Point] = []
        self.last: Optional[Point] = None

    def add(self, point: Point, keep: bool = False, weight: int = 1) -> None:
        """``keep``: kept whatever the stride (the first point of an attempt); ``weight``: the
        reports this point stands for (the ones skipped before it, see ``Series.line``)."""
        if keep or self.seen % self.stride == 0:
            self.points.append(point)
        self.seen += weight
        self.last = point
        if len(self.points) >= 2 * self.limit:
            self.points = self.points[::2]
            self.stride *= 2

    def out(self, newer: Optional[Point] = None) -> List[Point]:
        """At most ``limit`` points, the newest (``newer``, when given) among them."""
        points = self.points
        last = newer or self.last
        if last is not None and (not points or points[-1] is not last):
            points = points + [last]
        return evenly(points, self.limit)


def evenly(points: list, limit: int) -> list:
    """At most ``limit`` of ``points``, evenly spaced, the first and the last among them."""
    if len(points) <= limit:
        return list(points)
    if limit < 2:
        return points[-limit:] if limit else []
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


class Series:
    """The metrics of one log (or of several, one per attempt) as the lines come, oldest first."""

    def __init__(self, limit: int = MAX_POINTS):
        self.limit = limit
        self.metrics: Dict[str, Thinned] = {}
        self.attempt = 0
        self.attempts: List[dict] = [{"attempt": 0, "label": "attempt 0"}]
        self.new_attempt = True
        self.last_x: Optional[float] = None
        self.last_kind = ""
        self.count = 0  # lines that told something
        self.x_kind = ""  # "step", "epoch" or "report" (the n-th report, when no step nor epoch is given)
        self.dropped = 0  # metrics past MAX_METRICS
        # Once every metric keeps only every n-th point, only every n-th report line is parsed
        # (``skip``): a log of 100,000 reports is read at the cost of a few thousand.  The newest
        # line skipped is parsed when the series is asked for (``to_dict``).
        self.skip, self.skipped = 1, 0
        self.unparsed: Optional[str] = None

    def start_attempt(self, label: str, at: Optional[float] = None, reason: str = "") -> None:
        self.attempt += 1
        self.attempts.append({"attempt": self.attempt, "label": label, "at": at, "reason": reason})
        self.new_attempt = True
        self.last_x = None

    def line(self, text: str) -> None:
        note = RESTART_NOTE.match(text)
        if note:
            self.start_attempt(f"restart {note.group(1)}", reason=text[len("[cloudtrain] "):].strip()[:300])
            return
        if self.skip > 1 and not self.new_attempt and PREFIX in text and len(text) <= MAX_LINE \
                and rank_zero_text(text) is not None:
            self.skipped += 1
            if self.skipped < self.skip:
                self.count += 1
                self.unparsed = text
                return
        parsed = parse_line(text)
        if parsed is None:
            return
        weight = self.skipped if self.skipped else 1  # the reports this one stands for
        self.skipped, self.unparsed = 0, None
        self._take(parsed, weight)

    def _take(self, parsed, weight: int) -> None:
        _, at, fields, values = parsed
        if not values:
            return
        self.count += 1
        x, kind = self._x(fields)
        if not self.x_kind or kind == "step":
            self.x_kind = kind
        if self.last_x is not None and kind == self.last_kind != "report" and x < self.last_x and not self.new_attempt:
            self.start_attempt(f"restart at {kind} {x:g}")  # the platform started it again
        self.last_x, self.last_kind = x, kind
        keep, self.new_attempt = self.new_attempt, False
        for name, value in values.items():
            thinned = self.metrics.get(name)
            if thinned is None:
                if len(self.metrics) >= MAX_METRICS:
                    self.dropped += 1
                    continue
                thinned = self.metrics[name] = Thinned(self.limit)
            thinned.add((x, at, value, self.attempt), keep=keep, weight=weight)
        self.skip = min(t.stride for t in self.metrics.values()) if self.metrics else 1

    def _x(self, fields: dict) -> Tuple[float, str]:
        """Where a line is on the x axis: its step; a line without one in a log that gives steps
        (a Hugging Face dict between two reports) is at the step before it; else its epoch, else
        its number among the reports."""
        x, kind = fields.get("step"), "step"
        if x is None and self.x_kind == "step" and self.last_x is not None:
            x = self.last_x
        if x is None:
            x, kind = fields.get("epoch"), "epoch"
        if x is None:
            x, kind = float(self.count), "report"
        return x, kind

    def to_dict(self) -> dict:
        newest: Dict[str, Point] = {}
        parsed = parse_line(self.unparsed) if self.unparsed is not None else None
        if parsed is not None:  # the newest report, skipped so far
            _, at, fields, values = parsed
            x, _ = self._x(fields)
            newest = {name: (x, at, value, self.attempt) for name, value in values.items()}
        metrics = {name: [list(p) for p in t.out(newest.get(name))] for name, t in sorted(self.metrics.items())}
        return {"x": self.x_kind or "step", "reports": self.count, "attempts": [dict(a) for a in self.attempts],
                "metrics": metrics, "metrics_dropped": self.dropped}


def read_lines(chunks: Iterable[bytes], carry: bytes = b"") -> Tuple[List[str], bytes]:
    """The whole lines of ``carry`` + ``chunks`` (a line longer than ``MAX_LINE`` is skipped, as
    the parser would), and what is left after the last newline."""
    lines: List[str] = []
    for chunk in chunks:
        pieces = (carry + chunk).split(b"\n")
        carry = pieces.pop()
        if len(carry) > MAX_LINE:
            carry = b"\xff" * (MAX_LINE + 1)  # (too long already: its end is dropped too)
        lines += [p.decode("utf-8", "replace") for p in pieces if p and len(p) <= MAX_LINE]
    return lines, carry


class Tail:
    """A log file read as it grows: ``read()`` parses what was written since the last call."""

    def __init__(self, path: Path, limit: int = MAX_POINTS):
        self.path, self.limit = path, limit
        self.lock = threading.Lock()
        self._reset(None)

    def _reset(self, inode) -> None:
        self.inode, self.offset, self.carry = inode, 0, b""
        self.data = Series(self.limit)

    def read(self) -> dict:
        with self.lock:
            try:
                f = open(self.path, "rb")
            except FileNotFoundError:
                self._reset(None)
                return self.data.to_dict()
            with f:
                st = os.fstat(f.fileno())
                if st.st_ino != self.inode or st.st_size < self.offset:  # a new or truncated log
                    self._reset(st.st_ino)
                f.seek(self.offset)

                def chunks():
                    while True:
                        block = f.read(CHUNK)
                        if not block:
                            return
                        self.offset += len(block)
                        yield block
                for block in chunks():
                    lines, self.carry = read_lines([block], self.carry)
                    for text in lines:
                        self.data.line(text)
            return self.data.to_dict()


_tails: "OrderedDict[str, Tail]" = OrderedDict()
_remote: Dict[str, Tuple[float, dict]] = {}
_lock = threading.Lock()


def log_file_series(path: Path) -> dict:
    """The series of a local or docker job's log (read incrementally across calls)."""
    key = str(path)
    with _lock:
        tail = _tails.get(key)
        if tail is None:
            tail = _tails[key] = Tail(path)
        _tails.move_to_end(key)
        while len(_tails) > CACHED_LOGS:
            _tails.popitem(last=False)
    return tail.read()


def remote_series(handle: str, read: Callable[[], Iterable[str]]) -> dict:
    """The series of a cloud job's log, read through its provider (``read()``: its lines) at
    most once per ``REMOTE_TTL`` seconds."""
    now = time.monotonic()
    with _lock:
        cached = _remote.get(handle)
        if cached is not None and now - cached[0] < REMOTE_TTL:
            return cached[1]
    series = Series()
    for text in read():
        series.line(text.rstrip("\r\n"))
    found = series.to_dict()
    with _lock:
        _remote[handle] = (now, found)
        while len(_remote) > CACHED_LOGS:
            _remote.pop(next(iter(_remote)))
    return found


def combine(parts: List[Tuple[dict, dict]], limit: int = MAX_POINTS) -> dict:
    """One job's series from its attempts' (``(attempt, series)``, in order: a job the
    controller followed on several submissions): the attempts numbered through, ``limit``
    points per metric at most."""
    attempts: List[dict] = []
    metrics: Dict[str, list] = {}
    x_kind, reports, dropped = "", 0, 0
    ended = ""  # why the attempt before ended: the reason the next one began
    errors: List[str] = []
    for attempt, found in parts:
        base = len(attempts)
        for i, inner in enumerate(found["attempts"]):
            label = f"attempt {attempt['attempt']} ({attempt['provider']})"
            if i:
                label += f", {inner['label']}"
            attempts.append({"attempt": base + i, "label": label, "at": inner.get("at") or attempt.get("started_at"),
                             "reason": inner.get("reason") or ("" if i else ended),
                             "handle": attempt.get("handle")})
        for name, points in found["metrics"].items():
            if name not in metrics and len(metrics) >= MAX_METRICS:
                dropped += 1
                continue
            metrics.setdefault(name, []).extend([x, t, v, base + a] for x, t, v, a in points)
        ended = attempt.get("reason") or ""
        x_kind = x_kind if x_kind == "step" else found["x"]
        reports += found["reports"]
        if found.get("error"):
            errors.append(found["error"])
        dropped += found.get("metrics_dropped", 0)
    return {"x": x_kind or "step", "reports": reports, "attempts": attempts or [{"attempt": 0, "label": "attempt 0"}],
            "metrics": {n: evenly(p, limit) for n, p in sorted(metrics.items())}, "metrics_dropped": dropped,
            **({"error": "; ".join(errors)} if errors else {})}
