"""Providers whose nodes run on this machine (``local``, ``docker``): the shared lifecycle.

``schedule`` writes the run's plan and starts a detached supervisor (``cloudtrain.runtime.supervise``);
state lives in the SQLite store and logs under ``$CLOUDTRAIN_HOME/runs/<id>/``, so ``status``,
``logs -f``, ``cancel``, ``list`` and ``wait`` work from any shell.
"""
from __future__ import annotations

import json
import os
import secrets as _random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, ClassVar, Dict, Iterator, List, Optional, Tuple

from ..runtime import diskspace, doorbell
from ..runtime import procs
from ..spec.errors import BadInput, JobNotFound
from ..spec.job import JobSpec
from ..launch.platform import installed as installed_platforms
from ..launch.exitcodes import EXIT_INTERRUPTED, EXIT_JOB_FAILED
from .provider import JobStatus, Provider
from .request import Placeholder
from ..spec.states import TERMINAL, State
from ..input.homedir import make_home
from ..runtime.store import Store, home
from ..runtime.supervise import write_cancel_reason
from .survival import host_checkpoint_dir

# A render knows neither the run's id nor its directory: it shows these, submit fills them in.
RUN_ID = Placeholder.RUN_ID


def rendered_run_dir() -> str:
    """The run directory as a render shows it."""
    return str(home() / "runs" / RUN_ID)


def run_values(run_dir: Path) -> Dict[str, str]:
    """What ``request.fill`` puts in place of a render's run directory and id."""
    return {rendered_run_dir(): str(run_dir), RUN_ID: run_dir.name}
KEPT = {"CLOUDTRAIN_HOME", "CLOUDTRAIN_PLUGINS", "CLOUDTRAIN_DISABLE_PLUGINS", "CLOUDTRAIN_PEER_TIMEOUT"}


def scrubbed_environ(environ) -> Dict[str, str]:
    """``environ`` without the variables of the submitting shell that would confuse a node's
    platform detection: those every installed ``Platform`` says belong to it."""
    platforms = installed_platforms(environ)
    return {k: v for k, v in environ.items() if k in KEPT or not any(p.owns(k) for p in platforms)}


NEVER_STARTED = 10.0  # seconds: a job row without a supervisor PID older than this has none


END_OF_JOB = "[cloudtrain] job "  # the supervisor's last line in job.log


def follow_file(path: Path, done=None, poll: float = 0.02, idle_poll: float = 0.1,
                check_every: float = 0.5, bell: Optional[doorbell.Listener] = None, start: int = 0) -> Iterator[str]:
    """Lines of ``path``; with ``done`` (a callable), keep following until the job's last line
    (``[cloudtrain] job ...``) or until ``done()`` says it ended.  The file is read again
    ``poll`` seconds after a line came, backing off to ``idle_poll`` while none come (each
    wake-up can preempt a training rank on a busy machine); ``done()`` (a store read) is asked
    only every ``check_every``.  With the supervisor's ``bell`` the file is read as soon as a
    line is written (and when the supervisor ends), and between them only every ``check_every``."""
    doze: Callable[[float], object] = time.sleep
    if bell is not None:
        doze, idle_poll = bell.wait, check_every
    while done is not None and not path.exists():
        if done():
            break
        doze(poll)
    if not path.exists():
        return
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        if start:
            f.seek(start)  # a byte offset at a line's start (a follower of ``logselect.from_file``)
        pending = ""
        next_check = 0.0
        wait = poll
        while True:
            chunk = f.readline()
            if chunk:
                wait = poll
                pending += chunk
                if pending.endswith("\n"):
                    line, pending = pending, ""
                    yield line
                    if done is not None and line.startswith(END_OF_JOB):
                        return
                continue
            if done is None:
                break
            now = time.monotonic()
            if now >= next_check:
                next_check = now + check_every
                if done():
                    rest = f.read()
                    if pending or rest:
                        yield pending + rest
                    break
            doze(wait)
            wait = min(wait * 2, idle_poll)


class HostedProvider(Provider):
    """Base of providers whose supervisor runs here; subclasses name the supervisor module and
    say how to ``release`` what a job left when its supervisor is gone."""

    local_state = True
    status_poll = 0.2

    supervisor_module: ClassVar[str]
    cancel_timeout: ClassVar[float] = 30.0

    def __init__(self, store: Optional[Store] = None):
        super().__init__()
        self._store = store
        self._unstarted: Optional[Tuple[str, Path]] = None  # the run being made, until its supervisor runs
        self._bells: Dict[str, doorbell.Listener] = {}  # the supervisors this instance started

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store()
        return self._store

    def release(self, job_id: str) -> None:
        """Stop and remove whatever the job still has (its supervisor is gone or cancelling)."""

    def emulated(self, options):
        """The provider whose node environment the nodes get: ``options.emulate``, or this one."""
        if not options.emulate:
            return type(self)
        from ..extend.plugins import get_provider_class
        return get_provider_class(options.emulate)

    # -- submitting ----------------------------------------------------------------------
    def submit(self, job_or_rendered, *, secrets=None):
        """``Provider.submit``; one that fails before the job's supervisor runs (a full disk: a
        ``DiskFull`` naming the directory) leaves no run directory and no record of the job."""
        self._unstarted = None
        self._apply_run_retention()
        try:
            return super().submit(job_or_rendered, secrets=secrets)
        except BaseException as exc:
            self._discard_unstarted()
            if diskspace.is_full(exc):
                raise diskspace.full(getattr(exc, "filename", None) or home()) from None
            raise

    @staticmethod
    def _apply_run_retention() -> None:
        """The user config's retention of finished runs (``cloudtrain.providers.retention.apply_retention``: at
        most hourly, a few seconds at most, one stderr line when it removed some); a problem
        there never fails the submit."""
        try:
            from .retention import apply_retention
            apply_retention()
        except Exception:  # noqa: BLE001 -- the run is what the user asked for, not the clean-up
            pass

    def _discard_unstarted(self) -> None:
        if self._unstarted is None:
            return
        job_id, run_dir = self._unstarted
        self._unstarted = None
        shutil.rmtree(run_dir, ignore_errors=True)
        try:
            self.store.forget_job(job_id)
        except Exception:  # noqa: BLE001 -- the first error is the one to report
            pass

    def new_run(self, job: JobSpec) -> Tuple[str, Path]:
        code = job.code_path
        if code is None:  # validate refuses it (not code_optional); a Rendered made without it does not
            raise self.null_code(job)
        if not code.is_dir():
            raise BadInput(f"code directory {code} does not exist; fix `code` in the job file")
        job_id = f"{job.name}-{_random.token_hex(3)}"
        run_dir = make_home() / "runs" / job_id
        run_dir.mkdir(mode=0o700)
        self._unstarted = (job_id, run_dir)
        diskspace.reserve(run_dir)  # room for the supervisor to end the job on a full disk
        return job_id, run_dir

    @staticmethod
    def host_output(job: JobSpec, run_dir) -> Path:
        """The directory on this machine that holds the job's output: ``storage.output`` (a host
        path or file:// URI), else ``<run dir>/output``."""
        from ..transfer.storage import local_path
        return local_path(job, job.storage.output) if job.storage.output else Path(run_dir) / "output"

    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """Copy the job's output directory (``host_output``) into ``dest``."""
        job = self._reconcile(self._row(job_id))
        plan = json.loads((Path(job["run_dir"]) / "plan.json").read_text())
        source = Path(plan.get("output_dir") or Path(job["run_dir"]) / "output")
        from ..transfer.outputs import copy_tree, still_running
        if job["state"] not in TERMINAL:  # what it wrote so far, or why there is nothing yet
            still_running(self.handle(job_id), job["state"], source)
        return copy_tree(source, dest)

    def supervisor_prefix(self, plan: dict) -> List[str]:
        """What the supervisor's command runs under (the local provider: a network namespace)."""
        return []

    def start_supervisor(self, job: JobSpec, job_id: str, run_dir: Path, plan: dict,
                         secrets: Dict[str, str]) -> str:
        """Write the plan, record the job, start the detached supervisor with the secrets in its
        environment only (never on disk in clear, never in the plan)."""
        plan = dict(plan, job_id=job_id, name=job.name, code=str(job.code_path), max_restarts=job.max_restarts,
                    max_runtime=job.max_runtime, max_runtime_text=job.max_runtime_text,
                    output_dir=str(self.host_output(job, run_dir)),
                    distribution=job.distribution.type, nproc_per_node=job.procs_per_node)
        checkpoints = host_checkpoint_dir(job, self.name)
        if checkpoints is not None:  # kept across restarts and across submits: never removed here
            checkpoints.mkdir(parents=True, exist_ok=True)
        (run_dir / "plan.json").write_text(json.dumps(plan, indent=2))
        env = scrubbed_environ(os.environ)
        env.update(secrets)
        env["CLOUDTRAIN_HOME"] = str(home())
        env["CLOUDTRAIN_SECRET_NAMES"] = ",".join(sorted(secrets))
        # The supervisor first, then the job's row with its PID and start time in one write:
        # there is never a job without a supervisor to follow it.  The supervisor waits for its
        # row (and, if the submitting process died before writing it, removes the run and exits).
        bell, bell_end = doorbell.pair(env)
        try:
            with open(run_dir / "supervisor.log", "ab") as log:
                proc = subprocess.Popen([*self.supervisor_prefix(plan), sys.executable, "-m", self.supervisor_module,
                                         str(run_dir)], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True, close_fds=True, pass_fds=(bell_end,))
        except BaseException:
            os.close(bell)
            raise
        finally:
            os.close(bell_end)  # the supervisor's alone: its end closes the pipe
        self._bells[job_id] = doorbell.Listener(bell)
        self._unstarted = None  # the supervisor owns the run now
        started = procs.start_time(proc.pid)
        procs.record(run_dir, "supervisor", proc.pid, started)
        self.store.add_job(id=job_id, provider=self.name, name=job.name, nodes=job.distribution.nodes,
                           run_dir=str(run_dir), state=State.PENDING.value,
                           supervisor_pid=proc.pid, supervisor_start=started)
        return job_id

    # -- following -----------------------------------------------------------------------
    def _row(self, job_id: str) -> dict:
        row = self.store.get_job(job_id)
        if row is None or row["provider"] != self.name:
            # the ledger (the store's view of every submission) keeps a job that prune (or
            # runs.keep_days) removed
            known = self.store.ledger_rows("handle = ?", (self.handle(job_id),), 1)
            if known:
                handle, state = known[0]["handle"], known[0]["state"]
                raise JobNotFound(f"{handle} ended {state} and was pruned since (cloudtrain prune, or "
                                  "runs.keep_days): its run directory, logs and outputs are removed (cloudtrain list "
                                  "still shows its row)")
            raise JobNotFound(f"no {self.name} job {job_id!r}; cloudtrain list -p {self.name} shows the jobs")
        return row

    def _reconcile(self, row: dict) -> dict:
        """A job whose supervisor is gone without a word has failed, with the reason: a PID is
        the supervisor's only while its start time matches (PIDs are handed out again)."""
        if row["state"] in TERMINAL:
            return row
        pid = row["supervisor_pid"]
        if pid and procs.same(pid, row.get("supervisor_start")):
            return row
        if not pid and time.time() - row["created_at"] < NEVER_STARTED:
            return row  # a store from before supervisor PIDs came with the row: give it time
        time.sleep(0.2)  # its last write may be on its way
        if self._row(row["id"])["state"] not in TERMINAL:
            self.release(row["id"])
            diskspace.give_back(Path(row["run_dir"]))
            reason = (f"the {self.name} supervisor never started; see {Path(row['run_dir']) / 'supervisor.log'}"
                      if not pid else
                      f"the {self.name} supervisor (pid {pid}) is gone; see {Path(row['run_dir']) / 'supervisor.log'}")
            self.store.finish_job(row["id"], State.FAILED.value, exit_code=EXIT_JOB_FAILED, message=reason)
        return self._row(row["id"])  # JobNotFound if its row went meanwhile (removed by another process)

    def _status(self, row: dict) -> JobStatus:
        return JobStatus(handle=self.handle(row["id"]), state=State(row["state"]),
                         raw_state=row["raw_state"] or row["state"], name=row["name"], message=row["message"],
                         nodes=row["nodes"], nodes_up=row["nodes_up"], exit_code=row["exit_code"],
                         created_at=row["created_at"], started_at=row["started_at"], ended_at=row["ended_at"],
                         restarts=[{"attempt": r["attempt"], "reason": r["reason"], "at": r["at"]}
                                   for r in self.store.get_restarts(row["id"])])

    def status(self, job_id: str) -> JobStatus:
        return self._status(self._reconcile(self._row(job_id)))

    def run_dir(self, job_id: str) -> Path:
        return Path(self._row(job_id)["run_dir"])

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        path = self.run_dir(job_id) / "job.log"
        bell = self._bells.get(job_id) if follow else None
        yield from follow_file(path, (lambda: self.status(job_id).terminal) if follow else None, bell=bell)

    def running_row(self, job_id: str, what: str) -> dict:
        """The row of a job that runs now (``exec``, ``stacks`` reach into its nodes), else bad input."""
        row = self._reconcile(self._row(job_id))
        if row["state"] != State.RUNNING.value:
            raise BadInput(f"{self.handle(job_id)} is {row['state']}: {what} needs a running job "
                           f"(cloudtrain status {self.handle(job_id)})")
        return row

    def node_spec(self, row: dict, node: int) -> dict:
        """Node ``node``'s entry of the run's plan (plan.json), or bad input naming the nodes."""
        plan = json.loads((Path(row["run_dir"]) / "plan.json").read_text())
        specs = {spec["node"]: spec for spec in plan["nodes"]}
        if node not in specs:
            raise BadInput(f"--node {node}: {self.handle(row['id'])} has nodes 0 to {len(specs) - 1}")
        return specs[node]

    def node_pids(self, job_id: str, node: int) -> List[int]:
        """The processes of node ``node`` as this machine sees them (its launcher's PID first);
        what the rank processes are below it (``stacks``)."""
        raise BadInput(f"{self.name} cannot tell the processes of a node")

    # job.log's lines carry node and rank; job.times says when each part was written (runtime/logselect.py)
    log_selectors = frozenset({"node", "rank", "since"})

    def select_logs(self, job_id: str, selection, follow: bool = False) -> Iterator[str]:
        """The selected lines read from job.log itself: ``--since`` from the offset its time
        index gives, ``--tail`` from its end backwards; ``follow`` then goes on from there."""
        from ..runtime.logselect import from_file, matches
        path = self.run_dir(job_id) / "job.log"
        lines, end = from_file(path, selection)
        yield from lines
        if follow:
            bell = self._bells.get(job_id)
            for line in follow_file(path, lambda: self.status(job_id).terminal, bell=bell, start=end):
                if matches(line, selection):
                    yield line

    def cancel(self, job_id: str, reason: str = "cancelled") -> JobStatus:
        """Stop the job (SIGTERM to its supervisor, only while PID and start time match); its
        state becomes CANCELLED with ``reason`` (``interrupted``: the submitting CLI was)."""
        row = self._reconcile(self._row(job_id))
        if row["state"] in TERMINAL:
            return self._status(row)
        write_cancel_reason(Path(row["run_dir"]), reason)
        pid, started = row["supervisor_pid"], row["supervisor_start"]
        if procs.signal_process(pid, started, signal.SIGTERM):
            deadline = time.monotonic() + self.cancel_timeout
            while time.monotonic() < deadline and procs.same(pid, started):
                time.sleep(0.05)
        self.release(job_id)
        self.store.finish_job(job_id, State.CANCELLED.value, message=reason, exit_code=EXIT_INTERRUPTED)
        return self.status(job_id)

    def list(self) -> List[JobStatus]:
        statuses = []
        for row in self.store.list_jobs(self.name):
            try:
                statuses.append(self._status(self._reconcile(row)))
            except JobNotFound:  # its row was removed meanwhile by another process (cloudtrain prune)
                continue
        return statuses
