"""A job's progress where the user looks (issue 43): ``list``'s PROGRESS and ETA columns and
``wait``'s progress, read from the job's own log (``cloudtrain.runtime.progress``).

Only jobs whose log is on this machine (local, docker: ``Provider.local_state``) are read: any
other provider's log is a network call away per job (``Run.progress()`` reads it on request).
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional

from ..runtime.progress import Progress, describe, duration, from_file
from .progress import printable

LIST_TAIL = 64 << 10  # bytes of each job's log `list` reads at most, from its end
BAR_WIDTH = 20
WAIT_EVERY = 10.0  # seconds: `wait` writes at most one plain progress line this often


def of_entries(found: list) -> Dict[str, Progress]:
    """``{handle: Progress}`` of the ledger's entries (``cloudtrain.orchestrate.ledger.Entry``)
    whose log is on this machine (``$CLOUDTRAIN_HOME/runs/<id>/job.log``, where the hosted
    providers keep it) and tells any: no provider imported, no store read, ``LIST_TAIL`` bytes of
    each log at most (a run whose directory retention removed shows ``-``)."""
    import os
    from ..runtime.store import home
    runs = home() / "runs"
    try:
        present = set(os.listdir(runs))  # one read of the directory, not a failed open per removed run
    except OSError:
        return {}
    out: Dict[str, Progress] = {}
    for e in found:
        if not e.local or e.job_id not in present:
            continue
        try:
            progress = from_file(runs / e.job_id / "job.log", started_at=e.started_at, tail=LIST_TAIL)
        except OSError:  # a column of a listing: a log that cannot be read shows "-"
            continue
        if progress is not None:
            out[e.handle] = progress
    return out


def fraction(progress: Progress) -> Optional[float]:
    """How much is done, 0..1: steps, else epochs; None where no total is known."""
    for done, total in ((progress.step, progress.total_steps), (progress.epoch, progress.total_epochs)):
        if done is not None and total:
            return max(0.0, min(1.0, done / total))
    return None


def progress_cell(progress: Optional[Progress]) -> str:
    """``1200/5000 (24%)``, ``epoch 3/10 (30%)``, ``step 1200``; ``-`` when nothing is known."""
    if progress is None:
        return "-"
    share = fraction(progress)
    tail = f" ({share * 100:.0f}%)" if share is not None else ""
    if progress.step is not None:
        return f"{_number(progress.step)}/{_number(progress.total_steps)}{tail}" if progress.total_steps \
            else f"step {_number(progress.step)}"
    if progress.epoch is not None:
        total = f"/{_number(progress.total_epochs)}" if progress.total_epochs else ""
        return f"epoch {_number(progress.epoch)}{total}{tail}"
    return "-"


def eta_cell(progress: Optional[Progress], terminal: bool) -> str:
    """The time left while the job runs; ``-`` once it has ended or when it cannot be told."""
    if progress is None or progress.eta is None or terminal:
        return "-"
    return duration(progress.eta)


def _number(value: Optional[float]) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def with_columns(rows: List[tuple], found: list, progress: Dict[str, Progress]) -> List[tuple]:
    """``ledger.table``'s rows with PROGRESS and ETA after DURATION."""
    at = rows[0].index("DURATION") + 1
    out = [rows[0][:at] + ("PROGRESS", "ETA") + rows[0][at:]]
    for row, e in zip(rows[1:], found):
        p = progress.get(e.handle)
        out.append(row[:at] + (progress_cell(p), eta_cell(p, e.terminal)) + row[at:])
    return out


def json_fields(e, progress: Dict[str, Progress]) -> dict:
    """``progress`` (``status -o json``'s object, or None) and ``eta`` (seconds, None once ended)
    of one entry of ``list -o json``."""
    p = progress.get(e.handle)
    return {"progress": p.to_dict() if p is not None else None,
            "eta": p.eta if p is not None and not e.terminal else None}


def bar(share: float, width: int = BAR_WIDTH) -> str:
    filled = int(round(share * width))
    return "[" + "#" * filled + "-" * (width - filled) + f"] {share * 100:3.0f}%"


class WaitProgress:
    """``wait``'s feedback: the status line (``commands.progress.StatusLine``) with the job's
    progress: on a terminal one line redrawn in place, with a bar; otherwise a plain line each
    time the progress changes, at most one every ``every`` seconds (and the last one at the end)."""

    def __init__(self, run, line, every: float = WAIT_EVERY, clock: Callable[[], float] = time.monotonic):
        self.run, self.line, self.every, self.clock = run, line, every, clock
        self.readable = bool(getattr(run.provider, "local_state", False))
        self.text = ""
        self._read_at: Optional[float] = None
        self._written_at: Optional[float] = None
        self._written = ""

    def _progress(self, status) -> Optional[Progress]:
        try:
            from ..runtime.progress import of_run
            return of_run(self.run.provider, self.run.id, status)
        except Exception:  # noqa: BLE001 -- feedback only: the wait goes on without it
            return None

    def update(self, status) -> None:
        now = self.clock()
        # a terminal's line at most once a second; plain lines at most once per `every`
        gap = 1.0 if self.line.live else self.every
        if self.readable and (self._read_at is None or now - self._read_at >= gap or status.terminal):
            self._read_at = now
            found = self._progress(status)
            if found is not None and not found.empty:
                share = fraction(found)
                shown = bar(share) + " " if share is not None and self.line.live else ""
                self.text = printable(shown + describe(found))
        self.line.update(status, self.text if self.line.live else "")
        if not self.line.live and self.text and self.text != self._written and \
                (self._written_at is None or now - self._written_at >= self.every or status.terminal):
            self._written, self._written_at = self.text, now
            self.line.note(f"{status.handle}  {self.text}")
