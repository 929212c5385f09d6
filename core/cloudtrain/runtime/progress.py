"""A job's progress, read from its log: where it is, its latest metrics, when it will end.

Three forms are read, from rank 0 only (a line a local or docker job's log prefixes with
``[nodeN/rankR] `` counts when R is 0, or, without a rank, when N is 0; a line without a prefix,
as a cloud platform's log has it, counts):

- ``cloudtrain.launch.report``'s lines: ``CLOUDTRAIN_PROGRESS {"v":1,"t":...,"step":...}``;
- Hugging Face Trainer's log dicts: ``{'loss': 0.31, 'learning_rate': 5e-05, 'epoch': 1.5}``;
- plain ``epoch N/M`` and ``step N/M`` lines, with the ``name value`` pairs after them
  (``epoch 3/10 loss 0.2104 train_acc 0.94``).

Anything else, and any malformed line, is skipped.  Only the tail of a log is read (``TAIL``
bytes at most, backwards in blocks), newest line first: each field keeps its newest value.
"""
from __future__ import annotations

import ast
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from ..launch.report import NAME, PREFIX, VERSION, allowed

BLOCK = 64 << 10
TAIL = 4 << 20  # bytes of a log read at most, from its end
RATE_SAMPLES = 50  # timed reports the step rate is measured over
MAX_LINE = 8192
NODE_PREFIX = re.compile(r"\[node(\d+)(?:/rank(\d+))?\] ")
PLAIN = re.compile(r"\b(epoch|step)\s*[:=]?\s*(\d+)\s*/\s*(\d+)\b", re.IGNORECASE)
PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-/]*)(?:\s*[:=]\s*|\s+)(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)\b")
THROUGHPUT = (("samples_per_s", "samples/s"), ("samples_per_second", "samples/s"), ("tokens_per_s", "tokens/s"))
HF_KEYS = ("'loss'", "'epoch'", "'eval_loss'", "'train_loss'")


@dataclass
class Progress:
    """Where a job is: ``step``/``total_steps``, ``epoch``/``total_epochs``, the newest value
    of every metric, ``at`` (time of the newest report, seconds since the epoch), the rate of
    steps (per second) and the ``eta`` (seconds left) where they can be told."""
    step: Optional[float] = None
    total_steps: Optional[float] = None
    epoch: Optional[float] = None
    total_epochs: Optional[float] = None
    metrics: Dict[str, Optional[float]] = field(default_factory=dict)
    at: Optional[float] = None
    steps_per_s: Optional[float] = None
    eta: Optional[float] = None
    source: str = ""  # "report", "huggingface" or "plain": the form of the newest line used

    @property
    def empty(self) -> bool:
        return self.step is None and self.epoch is None and not self.metrics

    def to_dict(self) -> dict:
        return asdict(self)


def _number(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(value)
    return value if not (isinstance(value, float) and not math.isfinite(value)) else None


def _rank_zero_text(line: str) -> Optional[str]:
    """The line without its ``[nodeN/rankR]`` prefix when it comes from rank 0, else None."""
    found = NODE_PREFIX.match(line)
    if not found:
        return line
    node, rank = found.group(1), found.group(2)
    if (rank is not None and rank != "0") or (rank is None and node != "0"):
        return None
    return line[found.end():]


def parse_line(line: str) -> Optional[Tuple[str, Optional[float], dict, dict]]:
    """(form, time, fields, metrics) of one log line, or None: see the module's docstring."""
    if len(line) > MAX_LINE:
        return None
    text = _rank_zero_text(line.rstrip("\r\n"))
    if text is None:
        return None
    text = text.strip()
    try:
        if text.startswith(PREFIX):
            return _report(text[len(PREFIX):])
        if text.startswith("{") and text.endswith("}") and any(key in text for key in HF_KEYS):
            return _huggingface(text)
        if PLAIN.search(text):
            return _plain(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return None


def _report(body: str):
    record = json.loads(body)
    if not isinstance(record, dict) or record.get("v") != VERSION:
        return None
    at = record.get("t")
    fields = {k: _number(record[k]) for k in ("step", "total_steps", "epoch", "total_epochs") if k in record}
    metrics = record.get("metrics", {})
    if not isinstance(metrics, dict):
        return None
    kept = {k: (None if v is None else _number(v)) for k, v in metrics.items() if isinstance(k, str) and allowed(k)}
    return "report", (_number(at) if at is not None else None), fields, kept


def _huggingface(text: str):
    record = ast.literal_eval(text)
    if not isinstance(record, dict):
        return None
    fields = {"epoch": _number(record["epoch"])} if "epoch" in record else {}
    if "step" in record:
        fields["step"] = _number(record["step"])
    kept = {}
    for name, value in record.items():
        if name in ("epoch", "step") or not isinstance(name, str) or not allowed(name):
            continue
        try:
            kept[name] = _number(value)
        except ValueError:
            continue
    return "huggingface", None, fields, kept


def _plain(text: str):
    fields: dict = {}
    last = 0
    for found in PLAIN.finditer(text):
        kind, done, total = found.group(1).lower(), int(found.group(2)), int(found.group(3))
        if total <= 0 or done > total or kind in fields:
            continue
        fields[kind] = done
        fields["total_steps" if kind == "step" else "total_epochs"] = total
        last = found.end()
    if not fields:
        return None
    kept: Dict[str, Optional[float]] = {}
    for found in PAIR.finditer(text[last:]):
        name = found.group(1)
        if name.lower() in ("epoch", "step") or not allowed(name) or not NAME.match(name):
            continue
        kept.setdefault(name, _number(float(found.group(2))))
    return "plain", None, fields, kept


def lines_backwards(path, tail: int = TAIL, block: int = BLOCK) -> Iterator[str]:
    """The lines of file ``path`` from its end, newest first, ``tail`` bytes at most (a line cut
    by that limit is not given)."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        start_limit = max(0, end - tail)
        pos, rest = end, b""
        while pos > start_limit:
            size = min(block, pos - start_limit)
            pos -= size
            f.seek(pos)
            chunk = f.read(size) + rest
            pieces = chunk.split(b"\n")
            rest = pieces[0]
            for piece in reversed(pieces[1:]):
                if piece:
                    yield piece.decode("utf-8", "replace")
        if rest and start_limit == 0:
            yield rest.decode("utf-8", "replace")


def from_lines(newest_first: Iterable[str], *, started_at: Optional[float] = None,
               written_at: Optional[float] = None, now: Optional[float] = None) -> Optional[Progress]:
    """The progress the lines (newest first) tell, or None when none of them tells any.
    ``started_at`` (when the job started) and ``written_at`` (when the log was last written)
    time a log whose lines carry no time of their own."""
    progress = Progress()
    timed: List[Tuple[float, float]] = []  # (time, step) of report lines, newest first
    seen = 0
    for line in newest_first:
        parsed = parse_line(line)
        if parsed is None:
            continue
        form, at, fields, metrics = parsed
        seen += 1
        if not progress.source:
            progress.source = form
            progress.at = at
        for name, value in fields.items():
            if getattr(progress, name) is None:
                setattr(progress, name, value)
        for name, value in metrics.items():
            progress.metrics.setdefault(name, value)
        if at is not None and fields.get("step") is not None:
            timed.append((at, fields["step"]))
        if len(timed) >= RATE_SAMPLES or (seen >= RATE_SAMPLES and progress.step is not None):
            break
    if not seen:
        return None
    if progress.at is None:
        progress.at = written_at if written_at is not None else (timed[0][0] if timed else None)
    _rate(progress, timed, started_at)
    return progress


def _rate(progress: Progress, timed: List[Tuple[float, float]], started_at: Optional[float]) -> None:
    """Steps per second and the ETA: from the timed reports, else from the job's start to the
    newest line (plain steps, or epochs when only those are known)."""
    done, total = progress.step, progress.total_steps
    if done is None or not total:
        done, total = progress.epoch, progress.total_epochs
    if done is None or not total:
        return
    rate = None
    if len(timed) >= 2 and timed[0][0] > timed[-1][0] and timed[0][1] > timed[-1][1] and progress.step is not None:
        rate = (timed[0][1] - timed[-1][1]) / (timed[0][0] - timed[-1][0])
        done, total = progress.step, progress.total_steps or total
    elif started_at is not None and progress.at is not None and progress.at > started_at and done > 0:
        rate = done / (progress.at - started_at)
    if rate and rate > 0:
        if done is progress.step:
            progress.steps_per_s = rate
        progress.eta = max(0.0, (total - done) / rate)


def from_file(path, *, started_at: Optional[float] = None, now: Optional[float] = None,
              tail: int = TAIL) -> Optional[Progress]:
    """The progress of the log at ``path`` (None without one, or without a line that tells);
    ``tail``: bytes read at most, from its end."""
    path = Path(path)
    try:
        written_at = path.stat().st_mtime
        return from_lines(lines_backwards(path, tail), started_at=started_at, written_at=written_at, now=now)
    except FileNotFoundError:
        return None


def status_fields(run, status, cost: Optional[str] = None) -> Tuple[Optional[dict], Optional[str]]:
    """What ``status`` adds for ``run`` (a local or docker job's): the ``progress`` object of
    ``status -o json`` and its line, (None, None) without progress; ``cost``: the cost so far as
    the ledger tells it (``cloudtrain.orchestrate.ledger.cost_so_far``), or None.  Other providers' logs are
    a network call away: ``Run.progress()`` reads them on request, ``status`` does not."""
    if not getattr(run.provider, "local_state", False):
        return None, None
    try:
        found = of_run(run.provider, run.id, status)
    except OSError:
        return None, None
    if found is None:
        return None, None
    data = found.to_dict()
    data["cost_so_far"] = cost
    return data, describe(found, cost)


def of_run(provider, job_id: str, status=None) -> Optional[Progress]:
    """The progress of job ``job_id`` of ``provider``: a local or docker job's log read from its
    end; any other provider's through ``provider.logs`` (every line, then the newest first)."""
    started = status.started_at if status is not None else None
    run_dir = getattr(provider, "run_dir", None)
    if getattr(provider, "local_state", False) and run_dir is not None:
        return from_file(Path(run_dir(job_id)) / "job.log", started_at=started)
    lines = list(provider.logs(job_id))
    return from_lines(reversed(lines), started_at=started, written_at=time.time())


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 05 min``, ``2 d 4 h``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


def _shown(value: Optional[float]) -> str:
    if value is None:
        return "nan"
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    if 1000 <= abs(value) < 1e15:  # a throughput of 18470.3 reads 18470, never 1.847e+04
        return f"{value:.0f}"
    return f"{value:.4g}"


def describe(progress: Progress, cost: Optional[str] = None) -> str:
    """One line: ``step 1200/5000 · loss 0.31 · 412 samples/s · ETA 12 min`` (and the cost)."""
    parts = []
    for what, done, total in (("step", progress.step, progress.total_steps),
                              ("epoch", progress.epoch, progress.total_epochs)):
        if done is not None:
            parts.append(f"{what} {_shown(done)}" + (f"/{_shown(total)}" if total else ""))
    for name, value in progress.metrics.items():
        if name in dict(THROUGHPUT):
            continue
        if len(parts) >= 5:
            break
        parts.append(f"{name} {_shown(value)}")
    for name, unit in THROUGHPUT:
        if progress.metrics.get(name) is not None:
            parts.append(f"{_shown(progress.metrics[name])} {unit}")
            break
    if progress.eta is not None:
        parts.append(f"ETA {duration(progress.eta)}")
    if cost:
        parts.append(cost)
    return " · ".join(parts)
