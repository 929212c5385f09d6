"""The local state store: one SQLite file under ``$CLOUDTRAIN_HOME`` (default ``~/.cloudtrain``).

The local and Docker providers keep their jobs here, so ``status``, ``logs``, ``cancel``,
``list`` and ``wait`` work from any shell.  Cloud providers remember where a submitted job
lives (``remember``/``recall``: e.g. a kubeconfig context or an EKS cluster, never
credentials), so ``status HANDLE`` reaches the same cluster the job was sent to.  WAL mode: one
writer (a job's supervisor) and many readers at once.

Every change to a job is also kept in its run directory (``job.json``): a damaged store is
moved aside and rebuilt from them (``cloudtrain.runtime.storerepair``).  A full disk is ``DiskFull``
(one line, exit 3), and reads go on from the store as it is (SQLite's WAL index cannot be made
on a full disk, the store is then read as an immutable file).
"""
from __future__ import annotations

import functools
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from ..input.homedir import home, make_home, narrow_if_present, private_file  # noqa: F401  (home: re-exported)
from . import diskspace, storerepair
from ..spec.states import TERMINAL

PLAN_COLUMNS = ("handle", "state", "step", "reason", "next_step", "candidates", "jobs", "profile", "restarts_itself",
                "max_restarts", "preemptions", "failures", "budget", "currency", "warned", "max_runtime",
                "cancel_requested", "created_at", "updated_at")
ATTEMPT_COLUMNS = ("handle", "attempt", "provider", "attempt_handle", "state", "nodes", "rate", "currency",
                   "started_at", "ended_at", "kind", "reason")


class StaleTransition(RuntimeError):
    """A compare-and-set found the row in another state than expected: someone else moved it
    (a second controller, a ``cancel``), or it is gone.  Nothing was written."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    raw_state TEXT,
    message TEXT NOT NULL DEFAULT '',
    nodes INTEGER NOT NULL,
    nodes_up INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    supervisor_pid INTEGER,
    supervisor_start INTEGER,
    run_dir TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL
);
CREATE TABLE IF NOT EXISTS nodes (
    job_id TEXT NOT NULL,
    node INTEGER NOT NULL,
    pid INTEGER,
    pid_start INTEGER,
    exit_code INTEGER,
    PRIMARY KEY (job_id, node)
);
CREATE INDEX IF NOT EXISTS jobs_provider ON jobs (provider, created_at);
CREATE TABLE IF NOT EXISTS restarts (
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    reason TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS remote_jobs (
    handle TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    handle TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    job_id TEXT NOT NULL,
    name TEXT,
    profile TEXT,
    instance_type TEXT,
    nodes INTEGER,
    spot INTEGER,
    rate REAL,
    currency TEXT,
    submitted_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    state TEXT NOT NULL,
    restarts INTEGER NOT NULL DEFAULT 0,
    emulated TEXT,
    message TEXT NOT NULL DEFAULT '',
    tried TEXT,
    refreshed_at REAL
);
CREATE TABLE IF NOT EXISTS plans (
    handle TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    step TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    next_step TEXT NOT NULL DEFAULT '',
    candidates TEXT NOT NULL,
    jobs TEXT NOT NULL,
    profile TEXT,
    restarts_itself INTEGER NOT NULL DEFAULT 0,
    max_restarts INTEGER NOT NULL DEFAULT 0,
    preemptions INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    budget REAL,
    currency TEXT,
    warned INTEGER NOT NULL DEFAULT 0,
    max_runtime INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (
    handle TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    provider TEXT NOT NULL,
    attempt_handle TEXT,
    state TEXT NOT NULL,
    nodes INTEGER,
    rate REAL,
    currency TEXT,
    started_at REAL,
    ended_at REAL,
    kind TEXT,
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (handle, attempt)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    handle TEXT NOT NULL,
    at REAL NOT NULL,
    event TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS events_handle ON events (handle, id);
CREATE INDEX IF NOT EXISTS ledger_submitted ON ledger (submitted_at);
CREATE INDEX IF NOT EXISTS ledger_job ON ledger (job_id, provider);
"""
# The ledger's columns (``cloudtrain.orchestrate.ledger``); a local or Docker job submitted without the ledger
# (``Provider.submit`` called directly, or by a cloudtrain older than the ledger) is read from
# ``jobs`` in the same shape, its state always the supervisor's.
LEDGER_COLUMNS = ("handle", "provider", "job_id", "name", "profile", "instance_type", "nodes", "spot", "rate",
                  "currency", "submitted_at", "started_at", "ended_at", "state", "restarts", "emulated", "message",
                  "tried", "refreshed_at")
_LIVE = "(SELECT COUNT(*) FROM restarts r WHERE r.job_id = j.id)"
# The view's two parts: the ledger's rows (with a local job's live columns from ``jobs``), and
# the local jobs that never went through the ledger.  ``ledger_rows`` orders and limits each part
# on its own first, so the newest N come from the submitted_at index, not a sort of every row.
LEDGER_PARTS = (f"""
SELECT l.handle, l.provider, l.job_id, l.name, l.profile, l.instance_type, COALESCE(j.nodes, l.nodes) AS nodes,
       l.spot, l.rate, l.currency, l.submitted_at, COALESCE(j.started_at, l.started_at) AS started_at,
       COALESCE(j.ended_at, l.ended_at) AS ended_at, COALESCE(j.state, l.state) AS state,
       CASE WHEN j.id IS NULL THEN l.restarts ELSE {_LIVE} END AS restarts, l.emulated,
       COALESCE(j.message, l.message) AS message, l.tried, l.refreshed_at, j.id IS NOT NULL AS local
FROM ledger l LEFT JOIN jobs j ON j.id = l.job_id AND j.provider = l.provider""", f"""
SELECT j.provider || '://' || j.id AS handle, j.provider, j.id AS job_id, j.name, NULL AS profile,
       NULL AS instance_type, j.nodes, NULL AS spot, NULL AS rate, NULL AS currency, j.created_at AS submitted_at,
       j.started_at, j.ended_at, j.state, {_LIVE} AS restarts, NULL AS emulated, j.message, NULL AS tried,
       NULL AS refreshed_at, 1 AS local
FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.job_id = j.id AND l.provider = j.provider)""")
LEDGER_VIEW = "\nUNION ALL\n".join(LEDGER_PARTS)
# Columns added since the first release: (table, column, type).  A store made before them gets
# them on first open (``migrate``).
ADDED_COLUMNS = (("jobs", "supervisor_start", "INTEGER"), ("nodes", "pid_start", "INTEGER"))


def _repairing(method):
    """``method``, tried once more after a repair when the store turns out damaged."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except storerepair.StoreDamaged:
            storerepair.repair(self.path, SCHEMA)
            return method(self, *args, **kwargs)
    return wrapper


def _survives_damage(cls):
    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_"):
            setattr(cls, name, _repairing(value))
    return cls


@_survives_damage
class Store:
    def __init__(self, path: Optional[Path] = None):
        self.path = Path(path) if path else make_home() / "state.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        storerepair.make_sound(self.path, SCHEMA)
        private_file(self.path)
        for suffix in ("-wal", "-shm"):  # SQLite makes these with the store's mode; an older one's
            narrow_if_present(Path(f"{self.path}{suffix}"))  # may be wider (another process may remove them)
        with self._connect() as db:
            db.executescript(SCHEMA)
            migrate(db)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection; ``DiskFull`` for a full disk, ``StoreDamaged`` for a corrupt store."""
        immutable = False
        try:
            db = self._open(immutable)
        except sqlite3.OperationalError as exc:
            if not self._full(exc) or self._wal_holds_commits():
                raise self._translated(exc) from None
            immutable = True  # no room for the WAL index: read the file as it is (it holds every commit)
            db = self._open(immutable)
        except sqlite3.DatabaseError as exc:
            raise self._translated(exc) from None
        try:
            yield db
        except sqlite3.DatabaseError as exc:
            if immutable and isinstance(exc, sqlite3.OperationalError):  # a write, on a full disk
                raise diskspace.full(self.path) from None
            raise self._translated(exc) from None
        finally:
            db.close()

    def _open(self, immutable: bool) -> sqlite3.Connection:
        if immutable:
            db = sqlite3.connect(f"file:{self.path}?immutable=1", uri=True, isolation_level=None)
        else:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.row_factory = sqlite3.Row
            if not immutable:
                db.execute("PRAGMA journal_mode=WAL")
                # WAL's NORMAL: a commit is not fsynced, a checkpoint is; an application or OS crash
                # keeps the store sound, a power cut may lose the newest commits (sqlite.org/pragma.html
                # #pragma_synchronous), which the run directories' job.json records give back
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("PRAGMA busy_timeout=30000")
        except BaseException:
            db.close()
            raise
        return db

    def _full(self, exc: sqlite3.Error) -> bool:
        """SQLITE_FULL, or an I/O error (making the WAL or its index) on a nearly full disk."""
        code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
        if code is not None and code & 0xFF == 13:  # SQLITE_FULL
            return True
        if code is not None and code & 0xFF not in (10, 14):  # SQLITE_IOERR, SQLITE_CANTOPEN
            return False
        return diskspace.nearly_full(self.path.parent)

    def _wal_holds_commits(self) -> bool:
        try:
            return os.path.getsize(f"{self.path}-wal") > 0
        except OSError:
            return False

    def _translated(self, exc: sqlite3.DatabaseError) -> Exception:
        if storerepair.damaged(exc):
            return storerepair.StoreDamaged(self.path, exc)
        if isinstance(exc, sqlite3.OperationalError) and self._full(exc):
            return diskspace.full(self.path)
        return exc

    def _record(self, job_id: str) -> None:
        """Keep the job's record in its run directory (``job.json``) as the store has it."""
        storerepair.write_record(self, job_id)

    def remember(self, handle: str, target: Dict[str, Any]) -> None:
        import json
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO remote_jobs (handle, target, created_at) VALUES (?, ?, ?)",
                       (handle, json.dumps(target, sort_keys=True), time.time()))

    def recall(self, handle: str) -> Optional[Dict[str, Any]]:
        import json
        with self._connect() as db:
            row = db.execute("SELECT target FROM remote_jobs WHERE handle = ?", (handle,)).fetchone()
        return json.loads(row["target"]) if row else None

    def recalled_targets(self, provider: str, keys) -> List[Dict[str, Any]]:
        """The distinct targets (only ``keys`` of each) remembered for ``provider``'s jobs."""
        import json
        with self._connect() as db:
            rows = db.execute("SELECT target FROM remote_jobs WHERE handle LIKE ? ORDER BY created_at DESC",
                              (provider + "://%",)).fetchall()
        seen, out = set(), []
        for row in rows:
            target = {k: json.loads(row["target"]).get(k) for k in keys}
            key = json.dumps(target, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(target)
        return out

    def add_job(self, *, id: str, provider: str, name: str, nodes: int, run_dir: str, state: str,
                **extra: Any) -> None:
        """``extra``: more columns written in the same statement (``supervisor_pid``, ...)."""
        cols = ", ".join(["id", "provider", "name", "state", "nodes", "run_dir", "created_at", *extra])
        with self._connect() as db:
            db.execute(f"INSERT INTO jobs ({cols}) VALUES ({', '.join('?' * (7 + len(extra)))})",
                       (id, provider, name, state, nodes, run_dir, time.time(), *extra.values()))
        self._record(id)

    def update_job(self, job_id: str, **fields: Any) -> None:
        if not fields:
            return
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._connect() as db:
            db.execute(f"UPDATE jobs SET {cols} WHERE id = ?", (*fields.values(), job_id))
        self._record(job_id)

    def finish_job(self, job_id: str, state: str, *, message: str = "", exit_code: Optional[int] = None) -> bool:
        """Move a job to a terminal state unless it already is in one; True if this call did it.
        Its raw state becomes that state too (it said RUNNING or RESTARTING n while it ran)."""
        with self._connect() as db:
            cur = db.execute(
                "UPDATE jobs SET state = ?, raw_state = ?, message = ?, exit_code = ?, ended_at = ?, nodes_up = 0 "
                f"WHERE id = ? AND state NOT IN ({', '.join('?' * len(TERMINAL))})",
                (state, state, message, exit_code, time.time(), job_id, *TERMINAL))
            done = cur.rowcount == 1
        self._record(job_id)
        return done

    def get_job(self, job_id: str) -> Optional[Dict[str, Any]]:
        with self._connect() as db:
            row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            return dict(row) if row else None

    def list_jobs(self, provider: Optional[str] = None, limit: int = 100) -> List[Dict[str, Any]]:
        with self._connect() as db:
            if provider:
                rows = db.execute("SELECT * FROM jobs WHERE provider = ? ORDER BY created_at DESC LIMIT ?",
                                  (provider, limit))
            else:
                rows = db.execute("SELECT * FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,))
            return [dict(r) for r in rows]

    def set_node(self, job_id: str, node: int, **fields: Any) -> None:
        with self._connect() as db:
            db.execute("INSERT OR IGNORE INTO nodes (job_id, node) VALUES (?, ?)", (job_id, node))
            if fields:
                cols = ", ".join(f"{k} = ?" for k in fields)
                db.execute(f"UPDATE nodes SET {cols} WHERE job_id = ? AND node = ?", (*fields.values(), job_id, node))
        self._record(job_id)

    def add_restart(self, job_id: str, attempt: int, reason: str) -> None:
        """Attempt ``attempt`` (1 = the first restart) was started because of ``reason``."""
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO restarts (job_id, attempt, reason, at) VALUES (?, ?, ?, ?)",
                       (job_id, attempt, reason, time.time()))
        self._record(job_id)

    def get_restarts(self, job_id: str) -> List[Dict[str, Any]]:
        with self._connect() as db:
            return [dict(r) for r in db.execute("SELECT attempt, reason, at FROM restarts WHERE job_id = ? "
                                                "ORDER BY attempt", (job_id,))]

    def get_nodes(self, job_id: str) -> List[Dict[str, Any]]:
        with self._connect() as db:
            return [dict(r) for r in db.execute("SELECT * FROM nodes WHERE job_id = ? ORDER BY node", (job_id,))]

    # -- the ledger (cloudtrain.orchestrate.ledger reads and writes it) ------------------------------------
    def ledger_put(self, row: Dict[str, Any]) -> None:
        """Add a ledger row, or replace the one of its handle (keeping what ``row`` does not give)."""
        cols = [c for c in LEDGER_COLUMNS if c in row]
        updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "handle")
        with self._connect() as db:
            db.execute(f"INSERT INTO ledger ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                       f"ON CONFLICT (handle) DO UPDATE SET {updates}", [row[c] for c in cols])

    def ledger_update(self, handle: str, **fields: Any) -> None:
        if fields:
            with self._connect() as db:
                db.execute(f"UPDATE ledger SET {', '.join(f'{k} = ?' for k in fields)} WHERE handle = ?",
                           (*fields.values(), handle))
            storerepair.write_plan_record(self, handle)  # (a followed job's row travels with its plan)

    def ledger_rows(self, where: str = "", params: tuple = (), limit: Optional[int] = None) -> List[sqlite3.Row]:
        """The ledger (every provider's submissions, and the local jobs) newest first; ``where``:
        an SQL condition over ``LEDGER_VIEW``'s columns."""
        cond = f"WHERE {where}" if where else ""
        if limit is None:
            sql = f"SELECT * FROM ({LEDGER_VIEW}) {cond} ORDER BY submitted_at DESC"
        else:  # each part's newest first (its index), then the newest of both
            top = f"ORDER BY submitted_at DESC LIMIT {int(limit)}"
            sql = (" UNION ALL ".join(f"SELECT * FROM (SELECT * FROM ({part}) {cond} {top})" for part in LEDGER_PARTS)
                   + f" {top}")
            params = tuple(params) * len(LEDGER_PARTS)
        with self._connect() as db:
            return db.execute(sql, params).fetchall()

    # -- the controller's plans, attempts and events (cloudtrain.orchestrate.controller) ------------------
    def plan_add(self, row: Dict[str, Any], event: str = "submitted", detail: str = "") -> bool:
        """Add a plan (a job the controller follows); False when its handle has one already."""
        now = time.time()
        row = dict(row, created_at=row.get("created_at", now), updated_at=now)
        cols = [c for c in PLAN_COLUMNS if c in row]
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            cur = db.execute(f"INSERT OR IGNORE INTO plans ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                             [row[c] for c in cols])
            if cur.rowcount == 1:
                db.execute("INSERT INTO events (handle, at, event, detail) VALUES (?, ?, ?, ?)",
                           (row["handle"], now, event, detail))
            db.execute("COMMIT")
        storerepair.write_plan_record(self, row["handle"])
        return cur.rowcount == 1

    def plan_move(self, handle: str, expected: Any, event: str = "", detail: str = "", **fields: Any) -> None:
        """Compare-and-set: write ``fields`` to the plan of ``handle`` only while its state is one
        of ``expected`` (a state or a tuple of them), and append ``event`` in the same
        transaction; ``StaleTransition`` when no row changed."""
        states = (expected,) if isinstance(expected, str) else tuple(expected)
        fields = dict(fields, updated_at=time.time())
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            cur = db.execute(f"UPDATE plans SET {cols} WHERE handle = ? AND state IN ({', '.join('?' * len(states))})",
                             (*fields.values(), handle, *states))
            if cur.rowcount != 1:
                db.execute("ROLLBACK")
                now = db.execute("SELECT state FROM plans WHERE handle = ?", (handle,)).fetchone()
                raise StaleTransition(f"{handle}: expected state {' or '.join(states)}, found "
                                      f"{now['state'] if now else 'no plan'}; nothing written")
            if event:
                db.execute("INSERT INTO events (handle, at, event, detail) VALUES (?, ?, ?, ?)",
                           (handle, time.time(), event, detail))
            db.execute("COMMIT")
        storerepair.write_plan_record(self, handle)

    def plan_flag(self, handle: str, **fields: Any) -> bool:
        """Set flags that need no state guard (``cancel_requested``, ``next_step``); False without a plan."""
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._connect() as db:
            found = db.execute(f"UPDATE plans SET {cols} WHERE handle = ?", (*fields.values(), handle)).rowcount == 1
        storerepair.write_plan_record(self, handle)
        return found

    def plan_get(self, handle: str) -> Optional[Dict[str, Any]]:
        with self._connect() as db:
            row = db.execute("SELECT * FROM plans WHERE handle = ?", (handle,)).fetchone()
            return dict(row) if row else None

    def plans(self, unfinished: bool = True) -> List[Dict[str, Any]]:
        """Every plan (``unfinished``: those not in a terminal state), oldest first."""
        cond = f"WHERE state NOT IN ({', '.join('?' * len(TERMINAL))})" if unfinished else ""
        with self._connect() as db:
            return [dict(r) for r in db.execute(f"SELECT * FROM plans {cond} ORDER BY created_at",
                                                 tuple(TERMINAL) if unfinished else ())]

    def plan_of_attempt(self, attempt_handle: str) -> Optional[str]:
        """The job handle whose attempt ``attempt_handle`` is (None: not an attempt of a plan)."""
        with self._connect() as db:
            row = db.execute("SELECT handle FROM attempts WHERE attempt_handle = ?", (attempt_handle,)).fetchone()
            return row["handle"] if row else None

    def attempt_add(self, row: Dict[str, Any]) -> None:
        """A new attempt (``StaleTransition`` when that attempt exists already: never two of one number)."""
        cols = [c for c in ATTEMPT_COLUMNS if c in row]
        with self._connect() as db:
            try:
                db.execute(f"INSERT INTO attempts ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                           [row[c] for c in cols])
            except sqlite3.IntegrityError:
                raise StaleTransition(f"{row['handle']}: attempt {row['attempt']} exists already") from None
        storerepair.write_plan_record(self, row["handle"])

    def attempt_move(self, handle: str, attempt: int, expected: Any, **fields: Any) -> None:
        """Compare-and-set on an attempt's ``state`` (see ``plan_move``)."""
        states = (expected,) if isinstance(expected, str) else tuple(expected)
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._connect() as db:
            cur = db.execute(f"UPDATE attempts SET {cols} WHERE handle = ? AND attempt = ? "
                             f"AND state IN ({', '.join('?' * len(states))})",
                             (*fields.values(), handle, attempt, *states))
            if cur.rowcount != 1:
                raise StaleTransition(f"{handle}: attempt {attempt} is not {' or '.join(states)}; nothing written")
        storerepair.write_plan_record(self, handle)

    def attempts(self, handle: str) -> List[Dict[str, Any]]:
        with self._connect() as db:
            return [dict(r) for r in db.execute("SELECT * FROM attempts WHERE handle = ? ORDER BY attempt", (handle,))]

    def events(self, handle: str) -> List[Dict[str, Any]]:
        with self._connect() as db:
            return [dict(r) for r in db.execute("SELECT at, event, detail FROM events WHERE handle = ? ORDER BY id",
                                                (handle,))]

    def forget_job(self, job_id: str) -> None:
        """Remove every trace of a job that never started (its submit failed)."""
        with self._connect() as db:
            for table, column in (("nodes", "job_id"), ("restarts", "job_id"), ("jobs", "id")):
                db.execute(f"DELETE FROM {table} WHERE {column} = ?", (job_id,))

def attempt_cost(row: Dict[str, Any], now: Optional[float] = None) -> Optional[float]:
    """An attempt's cost: nodes x rate x hours it ran (until now while it runs); None without a rate."""
    if row.get("rate") is None or row.get("started_at") is None:
        return None if row.get("rate") is None else 0.0
    end = row["ended_at"] if row.get("ended_at") is not None else (now or time.time())
    return round(row["rate"] * (row["nodes"] or 1) * max(0.0, end - row["started_at"]) / 3600.0, 4)


def attempts_view(handle: str, store: Optional["Store"] = None, now: Optional[float] = None) -> List[Dict[str, Any]]:
    """``[{attempt, provider, handle, started_at, ended_at, reason, cost}]`` of the job ``handle``
    (empty for a job the controller does not follow)."""
    rows = (store or Store()).attempts(handle)
    return [{"attempt": r["attempt"], "provider": r["provider"], "handle": r["attempt_handle"],
             "started_at": r["started_at"], "ended_at": r["ended_at"], "reason": r["reason"] or None,
             "cost": attempt_cost(r, now)} for r in rows]


def migrate(db: sqlite3.Connection) -> None:
    """Add the columns a store made by an older cloudtrain lacks.  A PID stored without its
    start time is adopted only if the process that has it now is provably the job's: a
    supervisor whose command line names the job's run directory, a node whose parent is that
    supervisor; any other is taken as gone (the job then fails, and nothing is signalled)."""
    added = []
    for table, column, kind in ADDED_COLUMNS:
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            added.append(column)
    if not added:
        return
    from .procs import adoptable_node, adoptable_supervisor, start_time
    live = f"state NOT IN ({', '.join('?' * len(TERMINAL))})"
    for job_id, pid, run_dir in db.execute(f"SELECT id, supervisor_pid, run_dir FROM jobs WHERE {live} AND "
                                           "supervisor_pid IS NOT NULL", tuple(TERMINAL)).fetchall():
        if not adoptable_supervisor(pid, run_dir):
            continue
        db.execute("UPDATE jobs SET supervisor_start = ? WHERE id = ?", (start_time(pid), job_id))
        for node, node_pid in db.execute("SELECT node, pid FROM nodes WHERE job_id = ? AND pid IS NOT NULL",
                                         (job_id,)).fetchall():
            if adoptable_node(node_pid, pid):
                db.execute("UPDATE nodes SET pid_start = ? WHERE job_id = ? AND node = ?",
                           (start_time(node_pid), job_id, node))
