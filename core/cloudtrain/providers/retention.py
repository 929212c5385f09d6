"""The retention of local and Docker runs: each run keeps ``$CLOUDTRAIN_HOME/runs/<id>`` (a copy
of the code, the nodes' logs, the outputs), and a finished one's directory goes when the user
config's rule says (``runs: {keep_days: 30, keep_last: 10}``, ``cloudtrain.input.config.Retention``):
it ended over ``keep_days`` ago and is not one of the newest ``keep_last`` finished runs.

``apply_retention`` applies the rule when a local or Docker job is submitted, at most once an
hour (``$CLOUDTRAIN_HOME/.last-prune``'s time), for at most ``BUDGET`` seconds, from the store's
rows alone, and says on stderr in one line what it removed.  ``cloudtrain prune [--older-than
AGE] [--keep-last N] [--dry-run]`` applies the same rule on demand (its options replace it) and
reads each job's state as ``status`` does (a job whose supervisor is gone is FAILED first).

The automatic rule never deletes what a job produced: a run whose ``output/`` holds files (where
a job's results land unless ``storage.output`` points elsewhere) is trimmed instead: everything
but ``output/``, ``job.log`` and ``plan.json`` goes (the working copies of the code: the bulk), the
job stays in ``list`` and ``cloudtrain outputs`` still copies its results.  ``cloudtrain prune``,
asked for by the user, removes the whole directory.

Whichever way: a job that has not ended is never touched, nor a directory a running job's row
names; only a real directory directly under ``$CLOUDTRAIN_HOME/runs`` is removed (a symbolic
link there is left alone, never followed), and the job's ledger row keeps its final state, times
and restarts (its cost) after its store row is forgotten.
"""
from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

EVERY = 3600.0  # seconds between two automatic applications of the rule
BUDGET = 2.0    # seconds an automatic application may take from a submit; the rest waits for the next
STAMP = ".last-prune"
TRIMMED = ".trimmed"  # in a run directory the automatic rule trimmed (its output kept)
KEPT_WHEN_TRIMMED = ("output", "job.log", "plan.json", TRIMMED)


@dataclass
class Candidate:
    provider: str
    job_id: str
    run_dir: Path      # $CLOUDTRAIN_HOME/runs/<name>, never resolved through a link
    ended: float

    @property
    def handle(self) -> str:
        from .provider import make_handle
        return make_handle(self.provider, self.job_id)


def _size(path: Path) -> int:
    """Bytes of the regular files under ``path``; links are counted as links, never followed."""
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in files + dirs:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _runs() -> Path:
    from ..input.homedir import home
    return (home() / "runs").resolve()


def _in_runs(runs: Path, stored: str) -> Optional[Path]:
    """``runs/<name>`` for a row's ``run_dir`` whose directory is ``runs`` (however the home was
    spelled when it was stored); None for any other place."""
    path = Path(stored)
    if not path.is_absolute() or path.name in ("", ".", "..") or path.parent.resolve() != runs:
        return None
    return runs / path.name


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def select(age_seconds: float, keep_last: int = 0, *, reconcile: bool = True,
           now: Optional[float] = None) -> Tuple[List[Candidate], List[Candidate]]:
    """``(to remove, refused)``: the finished local-state jobs that ended more than
    ``age_seconds`` ago and are not among the newest ``keep_last`` finished ones, and those of
    them whose directory is not a real directory of its own under ``runs`` (a link, a file, a
    directory a job that has not ended names too), which are left alone.  ``reconcile``: read
    each job's state as ``status`` does (else the stored state: nothing is waited for)."""
    from ..input.homedir import home
    from ..extend.plugins import get_provider, providers
    from ..spec.states import TERMINAL
    from ..runtime.store import Store
    if not (home() / "state.db").exists():
        return [], []
    runs = _runs()
    rows = Store().list_jobs(limit=10_000_000)
    installed = providers()  # (only the providers that have rows are imported: local, docker)
    local = {name for name in {r["provider"] for r in rows}
             if name in installed and getattr(installed[name].cls, "local_state", False)}
    rows = [r for r in rows if r["provider"] in local]
    ended: List[Tuple[float, dict]] = []
    live_dirs: set = set()
    for row in rows:
        state, ended_at = row["state"], row["ended_at"]
        if reconcile and state not in TERMINAL:
            status = get_provider(row["provider"]).status(row["id"])  # a dead supervisor's job is FAILED now
            state, ended_at = status.state.value, status.ended_at
        if state in TERMINAL:
            ended.append((ended_at or row["created_at"], row))
        else:  # its directory as named, and where that leads
            live_dirs.update((_in_runs(runs, row["run_dir"]), Path(row["run_dir"]).resolve()))
    ended.sort(key=lambda e: e[0], reverse=True)
    cutoff = (now or time.time()) - age_seconds
    going, refused = [], []
    for when, row in ended[max(0, keep_last):]:
        if when > cutoff:
            continue
        run_dir = _in_runs(runs, row["run_dir"])
        if run_dir is None:
            continue  # never outside $CLOUDTRAIN_HOME/runs
        found = Candidate(row["provider"], row["id"], run_dir, when)
        if run_dir in live_dirs or run_dir.resolve() in live_dirs or \
                (os.path.lexists(run_dir) and not _is_real_dir(run_dir)):
            refused.append(found)
        else:
            going.append(found)
    return going, refused


def keep_in_ledger(store, handle: str) -> None:
    """The ledger row of ``handle`` as it reads now (its store row's state, times, restarts),
    written down so that it stays when the store row goes."""
    from ..runtime.store import LEDGER_COLUMNS
    rows = store.ledger_rows("handle = ?", (handle,), 1)
    if rows:
        row = dict(rows[0])
        store.ledger_put({c: row[c] for c in LEDGER_COLUMNS})


def remove(found: Candidate, store) -> Optional[int]:
    """Remove a run's directory (a real one, never through a link) and its store row, keeping
    its ledger row; the bytes freed, or None when some of the directory could not be removed
    (files that are not the user's, e.g. a Docker container's as root): its row then stays."""
    real = _is_real_dir(found.run_dir)
    size = _size(found.run_dir) if real else 0
    if real:
        shutil.rmtree(found.run_dir, ignore_errors=True)
        if os.path.lexists(found.run_dir):
            return None
    keep_in_ledger(store, found.handle)
    store.forget_job(found.job_id)
    return size


def has_output(run_dir: Path) -> bool:
    """Does the run's own ``output/`` (a real directory, not a link) hold any file?"""
    output = run_dir / "output"
    if not _is_real_dir(output):
        return False
    for _root, _dirs, files in os.walk(output):  # os.walk follows no link by default
        if files:
            return True
    return False


def trim(found: Candidate) -> Optional[int]:
    """Remove all of a run's directory but ``KEPT_WHEN_TRIMMED`` (links removed as links, never
    followed) and mark it trimmed; the bytes freed, or None when some of it could not be removed."""
    run_dir = found.run_dir
    freed = 0
    for child in run_dir.iterdir():
        if child.name in KEPT_WHEN_TRIMMED:
            continue
        if _is_real_dir(child):
            freed += _size(child)
            shutil.rmtree(child, ignore_errors=True)
        else:
            freed += os.lstat(child).st_size
            child.unlink()
        if os.path.lexists(child):
            return None
    (run_dir / TRIMMED).touch()
    return freed


def apply_retention(*, now: Optional[float] = None, budget: float = BUDGET, stream=None) -> int:
    """The user config's rule, applied at most once every ``EVERY`` seconds (a submit calls
    this): jobs read as stored (a job that has not ended stays), at most ``budget`` seconds of
    removing (what is left is removed on the next submit); one line on ``stream`` (stderr) when
    something was removed.  The number of runs removed."""
    from ..input.config import retention
    from ..input.homedir import home, make_home, private_file
    from ..runtime.store import Store
    rule = retention()
    if rule.keep_days is None:  # rule.off
        return 0
    now = time.time() if now is None else now
    stamp = home() / STAMP
    try:
        if 0 <= now - stamp.stat().st_mtime < EVERY:
            return 0
    except FileNotFoundError:
        pass
    make_home()
    os.utime(private_file(stamp), (now, now))  # claimed first: a submit alongside does not do it too
    deadline = time.monotonic() + budget
    found, _ = select(rule.keep_days * 86400, rule.keep_last, reconcile=False, now=now)
    found = [c for c in found if not (c.run_dir / TRIMMED).exists()]
    store = Store() if found else None
    removed = trimmed = freed = 0
    for candidate in found:
        if time.monotonic() > deadline:
            os.utime(stamp, (0, 0))  # the rest on the next submit
            break
        keep_output = _is_real_dir(candidate.run_dir) and has_output(candidate.run_dir)
        size = trim(candidate) if keep_output else remove(candidate, store)
        if size is not None:
            freed += size
            trimmed, removed = (trimmed + 1, removed) if keep_output else (trimmed, removed + 1)
    if removed or trimmed:
        what = [f"removed {removed} finished run{'s' if removed != 1 else ''}"] if removed else []
        if trimmed:
            what.append(f"the working copies of {trimmed} whose output/ is kept")
        print(f"cloudtrain: {' and '.join(what)} that ended over {rule.keep_days}d ago ({_human(freed)} freed from "
              f"{home() / 'runs'}); runs.keep_days in the user config sets this (off: never)",
              file=stream or sys.stderr)
    return removed + trimmed
