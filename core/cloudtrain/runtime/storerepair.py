"""The state store survives damage: every job's run directory holds its record, the store is
rebuilt from them.

``job.json`` in ``$CLOUDTRAIN_HOME/runs/<id>/`` is the job's row of the store (handle, state,
raw state, message, exit code, supervisor, times), its nodes (PIDs, exit codes) and its
restarts, rewritten atomically (a temporary file, then a rename) whenever the store changes
them.  A job the controller follows (on any provider: most have no run directory) has its
record in ``$CLOUDTRAIN_HOME/plans/<sha256 of its handle>.json``: its plan, attempts, events and
ledger row, rewritten so whenever one of them changes.  A ``state.db`` that SQLite calls corrupt or "not a
database", or that has lost its tables (truncated), is moved aside as
``state.db.corrupt-<time>`` with one warning, and a new one is made from the records, so a
running job stays listed and can be cancelled.  A missing store is made from them too.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Dict, Iterator, List

from . import diskspace
from ..spec.errors import CloudtrainError, CloudtrainWarning
from ..launch.exitcodes import EXIT_PLATFORM

RECORD = "job.json"
PLANS = "plans"  # the controller's plans' records, in the home


class StoreDamaged(CloudtrainError):
    """SQLite says the store is corrupt (or not a database); the store repairs it and tries again."""

    exit_code = EXIT_PLATFORM

    def __init__(self, path: Path, cause: BaseException):
        self.path, self.cause = path, cause
        super().__init__(f"the state store {path} is damaged ({cause}); run the command again to rebuild it "
                         "from the run directories")


def damaged(exc: BaseException) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB: sqlite3 raises plain DatabaseError for these alone
    (busy, locked, I/O and full are OperationalError)."""
    return type(exc) is sqlite3.DatabaseError


def atomic_write(path: Path, text: str) -> None:
    """``path`` holds ``text`` or what it held before, never a part (a temporary file, then a
    rename); ``DiskFull`` if there is no room, with no temporary file left."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            data = text.encode()
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if diskspace.is_full(exc):
            raise diskspace.full(path) from None
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (a directory or a lock file) for this block."""
    if path.is_dir():
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    else:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_run_dirs: Dict[str, Path] = {}


def write_record(store, job_id: str) -> None:
    """Rewrite ``job_id``'s ``job.json`` from the store (under a lock on its run directory, so
    two writers cannot leave the older of two reads)."""
    run_dir = _run_dirs.get(job_id)
    if run_dir is None:  # a job's run directory never changes: one read per process
        with store._connect() as db:
            row = db.execute("SELECT run_dir FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            return
        run_dir = _run_dirs[job_id] = Path(row["run_dir"])
    if not run_dir.is_dir():
        return
    with _locked(run_dir):
        with store._connect() as db:
            job = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if job is None:
                return
            nodes = [dict(r) for r in db.execute("SELECT * FROM nodes WHERE job_id = ? ORDER BY node", (job_id,))]
            restarts = [dict(r) for r in db.execute("SELECT * FROM restarts WHERE job_id = ? ORDER BY attempt",
                                                    (job_id,))]
        record = {"handle": f"{job['provider']}://{job['id']}", "job": dict(job), "nodes": nodes,
                  "restarts": restarts}
        atomic_write(run_dir / RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")


def plan_record_path(home: Path, handle: str) -> Path:
    import hashlib
    return home / PLANS / (hashlib.sha256(handle.encode()).hexdigest()[:32] + ".json")


def write_plan_record(store, handle: str) -> None:
    """Rewrite the record of the plan of ``handle`` from the store (nothing without a plan); read
    and written under a lock on the records' directory, so two writers never leave the older read."""
    from ..input.homedir import private_dir
    folder = private_dir(Path(store.path).parent / PLANS)
    with _locked(folder):
        with store._connect() as db:
            plan = db.execute("SELECT * FROM plans WHERE handle = ?", (handle,)).fetchone()
            if plan is None:
                return
            attempts = [dict(r) for r in db.execute("SELECT * FROM attempts WHERE handle = ? ORDER BY attempt",
                                                    (handle,))]
            events = [dict(r) for r in db.execute("SELECT at, event, detail FROM events WHERE handle = ? ORDER BY id",
                                                  (handle,))]
            ledger = db.execute("SELECT * FROM ledger WHERE handle = ?", (handle,)).fetchone()
        record = {"handle": handle, "plan": dict(plan), "attempts": attempts, "events": events,
                  "ledger": dict(ledger) if ledger else None}
        atomic_write(plan_record_path(folder.parent, handle), json.dumps(record, indent=1, sort_keys=True) + "\n")


def read_plan_records(plans: Path) -> List[dict]:
    """Every readable plan record under ``plans``."""
    records = []
    for path in sorted(plans.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("plan"), dict):
            records.append(record)
    return records


def read_records(runs: Path) -> List[dict]:
    """Every readable ``job.json`` under ``runs``."""
    records = []
    for path in sorted(runs.glob(f"*/{RECORD}")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("job"), dict):
            records.append(record)
    return records


def _insert(db: sqlite3.Connection, table: str, row: dict) -> None:
    columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
    keys = [k for k in row if k in columns]
    db.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})",
               [row[k] for k in keys])


def create(path: Path, schema: str) -> int:
    """Make the store at ``path`` from the records under ``path``'s ``runs/``, all at once (built
    aside, then linked into place: no process ever sees it half made); the jobs it holds."""
    records = read_records(path.parent / "runs")
    plans = read_plan_records(path.parent / PLANS)
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}")
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # built aside, synced once below before it is linked in
            db.executescript(schema)
            db.execute("BEGIN")
            for record in records:
                _insert(db, "jobs", record["job"])
                for node in record.get("nodes") or []:
                    _insert(db, "nodes", node)
                for restart in record.get("restarts") or []:
                    _insert(db, "restarts", restart)
            for plan in plans:
                _insert(db, "plans", plan["plan"])
                for attempt in plan.get("attempts") or []:
                    _insert(db, "attempts", attempt)
                for event in plan.get("events") or []:
                    _insert(db, "events", dict(event, handle=plan["handle"]))
                if isinstance(plan.get("ledger"), dict):
                    _insert(db, "ledger", plan["ledger"])
            db.execute("COMMIT")
        finally:
            db.close()  # the last connection: the WAL is checkpointed into the file and removed
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o600)
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs
            os.link(tmp, path)
    except sqlite3.OperationalError:
        if diskspace.nearly_full(path.parent):
            raise diskspace.full(path) from None
        raise
    except OSError as exc:
        if diskspace.is_full(exc):
            raise diskspace.full(path) from None
        raise
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return len(records) + len(plans)


def trouble(path: Path) -> str:
    """Why the store at ``path`` cannot be used as it is ("" if it can): not a database,
    corrupt, or without its tables (a file truncated to nothing)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30, isolation_level=None)
    except sqlite3.Error:
        return ""  # missing, or not ours to judge (permissions): the caller's own error follows
    try:
        db.execute("PRAGMA busy_timeout=30000")
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone():
            return "it has no tables: truncated"
        problems = [r[0] for r in db.execute("PRAGMA quick_check")]
        return "" if problems == ["ok"] else f"integrity check: {problems[0]}"
    except sqlite3.DatabaseError as exc:
        return str(exc) if damaged(exc) else ""
    finally:
        db.close()


def repair(path: Path, schema: str, why: str) -> None:
    """Move the damaged store aside (``state.db.corrupt-<time>``, its WAL beside it) and make a
    new one from the run directories; one warning says so.  Under a lock: of processes that
    find it damaged at once, one repairs it and the others use the new store."""
    with _locked(path.with_name(path.name + ".lock")):
        if path.exists():
            why = trouble(path) or ""
            if not why:
                return  # repaired by another process meanwhile
            stamp = time.strftime("%Y%m%dT%H%M%S")
            aside = path.with_name(f"{path.name}.corrupt-{stamp}")
            n = 1
            while aside.exists():
                n += 1
                aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
            os.rename(path, aside)
            with contextlib.suppress(FileNotFoundError):
                os.rename(f"{path}-wal", f"{aside}-wal")
            for kept in (aside, Path(f"{aside}-wal")):  # what it held is the user's alone, as the store was
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(kept, 0o600)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{path}-shm")
        else:
            aside = None
        count = create(path, schema)
    if aside is not None:
        warnings.warn(f"the state store {path} was damaged ({why}); moved it to {aside.name} and rebuilt it "
                      f"from the run directories ({count} job{'s' if count != 1 else ''})", CloudtrainWarning)


def make_sound(path: Path, schema: str) -> None:
    """Before a store is used: made from the run directories if missing, repaired if damaged."""
    if not path.exists():
        create(path, schema)
        return
    why = trouble(path)
    if why:
        repair(path, schema, why)
