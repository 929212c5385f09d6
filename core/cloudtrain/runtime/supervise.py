"""Supervising a job whose nodes run on this machine (the local and Docker providers).

A detached supervisor process starts every node, pumps their output into node- and
rank-prefixed logs (secrets masked), keeps the job's state in the store, stops every node as
soon as one fails (fail fast), restarts the whole job up to ``max_restarts`` times (each
restart's reason kept in the store), fails it when ``max_runtime`` is reached, and stops
everything on SIGTERM (cancel).  Providers supply the ``Node`` kind: a process group, a container.

A full disk (ENOSPC in the logs, the store or the run directory) fails the job at once with
``disk full under <dir>``: the nodes' output is still read (and dropped), so no node blocks on
a full pipe, every node is stopped, then the run's reserve (``cloudtrain.runtime.diskspace``) is given
back so that the job's end can be written; until it can, the supervisor tries again.
"""
from __future__ import annotations

import abc
import json
import os
import re
import shutil
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, TextIO, Tuple

from . import diskspace, doorbell
from ..spec.errors import DiskFull
from . import procs
from ..launch.exitcodes import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_OK
from ..launch.failure import FailureReader
from ..input.secrets import Masker
from ..spec.states import TERMINAL, State
from .logselect import TIMES, TimeIndex
from .store import Store

# torchrun --tee prefixes "[default<local_rank>]:", mpirun --tag-output "[<job>,<rank>]<stdout>:"
TORCHRUN_TAG = re.compile(r"^\[default(\d+)\]:")
MPI_TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:")
STOP_GRACE = 5.0
RECHECK = 1.0         # seconds: the longest the monitor sleeps without being woken
OUTPUT_TO_EXIT = 0.5  # seconds: from a node closing its output to its exit status
CANCEL_REASON = "cancel-reason"  # in the run dir: why the job is being cancelled
ROW_TIMEOUT = 30.0    # seconds: the longest a supervisor waits for its job's row
# how a cancelled job ends: (state, message, exit code)
CANCELLED = (State.CANCELLED.value, "cancelled", EXIT_INTERRUPTED)
LAST_WORDS_RETRY = 1.0  # seconds between tries to record the job's end on a full disk


def write_cancel_reason(run_dir: Path, reason: str) -> None:
    try:
        (run_dir / CANCEL_REASON).write_text(reason)
    except OSError:
        pass


def read_cancel_reason(run_dir: Path) -> Optional[str]:
    """The reason ``cancel`` gave, if the job is being cancelled."""
    try:
        return (run_dir / CANCEL_REASON).read_text().strip() or "cancelled"
    except OSError:
        return None


class LogSink:
    """Writes every node line to job.log (prefixed), node-<i>.log and node-<i>/rank-<r>.log.

    On a full disk it stops writing (``full`` says where; ``on_full`` is told once) and drops
    what comes after, so the nodes' output is still read."""

    def __init__(self, run_dir: Path, nodes: int, nproc: int, distribution: str, mask: Masker):
        self.run_dir, self.nproc, self.distribution, self.mask = run_dir, nproc, distribution, mask
        self.full: Optional[DiskFull] = None
        self.on_full: Callable[[DiskFull], object] = lambda error: None  # told of the first full disk
        self.lock = threading.Lock()
        self.job_log = open(run_dir / "job.log", "a", encoding="utf-8", buffering=1)
        # when each part of job.log was written: `cloudtrain logs --since` (runtime/logselect.py)
        self.times = TimeIndex(run_dir / TIMES, (run_dir / "job.log").stat().st_size)
        self.node_logs = [open(run_dir / f"node-{i}.log", "a", encoding="utf-8", buffering=1) for i in range(nodes)]
        self.rank_logs: Dict[int, TextIO] = {}
        self.partial: Dict[int, str] = {}  # mpirun tags every write, so a rank's line may come in pieces
        self.bell = doorbell.Bell.from_environ()  # tells a following `cloudtrain submit` of each line

    def _rank_log(self, node: int, rank: int) -> TextIO:
        f = self.rank_logs.get(rank)
        if f is None:
            path = self.run_dir / f"node-{node}" / f"rank-{rank}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            f = self.rank_logs[rank] = open(path, "a", encoding="utf-8", buffering=1)
        return f

    def write(self, node: int, line: str) -> None:
        if self.distribution in ("mpi", "horovod"):
            self._write_mpi(node, line)
            return
        line = line.rstrip("\n")
        rank: Optional[int] = None
        m = TORCHRUN_TAG.match(line) if self.distribution in ("ddp", "deepspeed") else None
        if m:
            rank = int(m.group(1)) + node * self.nproc
            line = line[m.end():]
        elif self.distribution in ("ps-worker", "none", "ray"):
            rank = node
        self._emit(node, rank, line)

    def _write_mpi(self, node: int, raw: str) -> None:
        """``[1,3]<stdout>:ra`` ``[1,3]<stdout>:nk 3\\n`` -> one line of rank 3."""
        pieces = MPI_TAG.split(raw)
        if pieces[0].strip():
            self._emit(node, None, pieces[0].rstrip("\n"))
        for rank_text, text in zip(pieces[1::2], pieces[2::2]):
            rank = int(rank_text)
            buf = self.partial.get(rank, "") + text
            while "\n" in buf:
                line, buf = buf.split("\n", 1)
                # -H lists every node's slots in order and --map-by slot fills them in order
                self._emit(rank // self.nproc, rank, line)
            self.partial[rank] = buf

    def _emit(self, node: int, rank: Optional[int], line: str) -> None:
        if self.full is not None:
            return
        line = self.mask(line)
        prefix = f"[node{node}/rank{rank}] " if rank is not None else f"[node{node}] "
        with self.lock, self._marking_full():
            self.times.before(prefix + line + "\n")
            self.job_log.write(prefix + line + "\n")
            self.node_logs[node].write(line + "\n")
            if rank is not None:
                self._rank_log(node, rank).write(line + "\n")
        self.bell.ring()

    def note(self, text: str) -> None:
        with self.lock, self._marking_full():  # tried even on a full disk: the supervisor may have freed room
            note = f"[cloudtrain] {self.mask(text)}\n"
            self.times.before(note)
            self.job_log.write(note)
        self.bell.ring()

    @contextmanager
    def _marking_full(self):
        """ENOSPC in the block marks the disk full (and tells ``on_full`` once)."""
        try:
            yield
        except OSError as exc:
            if not diskspace.is_full(exc):
                raise
            if self.full is None:
                self.full = diskspace.full(self.run_dir)
                self.on_full(self.full)

    def close(self) -> None:
        for rank, rest in sorted(self.partial.items()):
            if rest:
                self._emit(rank // self.nproc, rank, rest)
        self.partial.clear()
        for f in [self.job_log, self.times.file, *self.node_logs, *self.rank_logs.values()]:
            try:
                f.close()
            except OSError as exc:  # the last buffered bytes, on a full disk
                if not diskspace.is_full(exc):
                    raise


TORCHRUN_DIR = "torchrun"  # <run>/node-<i>/torchrun: torchrun's --log-dir (launch.plans.torchrun)
TORCHRUN_ERROR_FILE = "error.json"


def torchrun_files(run_dir: Path) -> List[Path]:
    """Every file torchrun wrote under the run's nodes: ``attempt_<n>/<rank>/{stdout,stderr}.log``
    (what ``--tee`` reads back into its own output, which ``LogSink`` masks) and ``error.json``
    (a rank's exception, which the job's text, and so its secrets, may be in).  Links are
    neither followed nor listed: what is removed here is torchrun's, never what a link reaches."""
    found = []
    for top in run_dir.glob(f"node-*/{TORCHRUN_DIR}"):
        if top.is_symlink():
            continue
        for folder, _, files in os.walk(top):  # (followlinks=False)
            found += [p for p in (Path(folder) / f for f in files) if p.is_file() and not p.is_symlink()]
    return sorted(found)


def masked_torchrun_errors(run_dir: Path, mask: Masker) -> Dict[Path, str]:
    """``{path: masked text}`` of every torchrun error file of the run (the first failure's
    report reads them: only ever through here, masked)."""
    out = {}
    for path in torchrun_files(run_dir):
        if path.name == TORCHRUN_ERROR_FILE:
            try:
                out[path] = mask(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
    return out


def scrub_torchrun_files(run_dir: Path, mask: Masker) -> None:
    """What torchrun leaves may hold a secret in clear: its per-rank logs (already read, by
    ``--tee``, into the masked logs) are removed, each error file is rewritten masked."""
    errors = masked_torchrun_errors(run_dir, mask)
    for path in torchrun_files(run_dir):
        try:
            if path in errors:
                tmp = path.with_name(path.name + ".masked")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(errors[path])
                os.replace(tmp, path)
            else:
                path.unlink()
        except OSError:
            continue


class Node(abc.ABC):
    """One running node of a job."""

    index: int

    @abc.abstractmethod
    def lines(self) -> Iterator[str]:
        """The node's output, line by line, until it ends."""

    @abc.abstractmethod
    def poll(self) -> Optional[int]:
        """The exit code once the node has ended, else None."""

    @abc.abstractmethod
    def stop(self, grace: float) -> None:
        """Ask the node to stop, force it after ``grace`` seconds; return when it has ended."""

    def wait(self, timeout: float) -> Optional[int]:
        """The exit code, waiting up to ``timeout`` seconds for it (None if still running)."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None or time.monotonic() >= deadline:
                return code
            time.sleep(0.05)


class Supervisor(abc.ABC):
    """Runs one job: ``python -m <provider's supervisor module> RUN_DIR``."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.plan = json.loads((run_dir / "plan.json").read_text())
        self.job_id = self.plan["job_id"]
        self.store = Store()
        names = [n for n in os.environ.get("CLOUDTRAIN_SECRET_NAMES", "").split(",") if n]
        self.secrets = {n: os.environ[n] for n in names if n in os.environ}
        self.sink = LogSink(run_dir, len(self.plan["nodes"]), int(self.plan.get("nproc_per_node") or 1),
                            self.plan.get("distribution") or "ddp", Masker(self.secrets.values()))
        self.nodes: List[Node] = []
        self.done = threading.Event()   # cancel: SIGTERM / SIGINT
        self.wake = threading.Event()   # something to look at: a node's output ended, or cancel
        self.output_ended: set = set()  # nodes (of this attempt) whose output has ended
        self.failures: Dict[int, FailureReader] = {}  # what each node's launcher said of its failure
        self.deadline: Optional[float] = None  # monotonic time at which max_runtime is reached
        self.timed_out = False
        self.disk_full: Optional[DiskFull] = None  # ENOSPC met: the job fails, without a restart
        self.sink.on_full = self.on_disk_full
        self._watchdog_pipe: Optional[int] = None  # our end of the watchdog's pipe

    # -- what a provider supplies ------------------------------------------------------
    def prepare(self) -> None:
        """Once per job, before the first attempt (copy code, create networks, ...)."""

    @abc.abstractmethod
    def start_node(self, spec: dict, attempt: int) -> Node:
        """Start one node of ``plan["nodes"]``."""

    def cleanup(self) -> None:
        """Once per job, after the last attempt, whatever happened (remove what the job made)."""

    # -- the generic part ----------------------------------------------------------------
    def start(self, attempt: int) -> None:
        self.nodes = []
        self.output_ended = set()
        self.failures = {spec["node"]: FailureReader() for spec in self.plan["nodes"]}
        for spec in self.plan["nodes"]:
            node = self.start_node(spec, attempt)
            self.nodes.append(node)
            threading.Thread(target=self._pump, args=(node, self.output_ended), daemon=True).start()
        self.store.update_job(self.job_id, state=State.RUNNING.value, raw_state=State.RUNNING.value,
                              nodes_up=len(self.nodes), started_at=time.time())

    def _pump(self, node: Node, ended: set) -> None:
        try:
            reader = self.failures[node.index]
            for line in node.lines():
                self.sink.write(node.index, line)
                if line.startswith("cloudtrain launch: "):
                    reader.feed(self.sink.mask(line))
        finally:
            ended.add(node.index)  # this attempt's set: a pump of an earlier attempt may end late
            self.wake.set()  # its output ended: the node is ending

    def monitor(self) -> Tuple[str, str, int]:
        """Wait for every node; return (state, message, exit_code).

        Woken when a node's output ends (or on cancel), not by polling: on a machine whose cores
        the job keeps busy, every wake-up of this process can preempt a rank, and ranks in
        lockstep all wait for it.  ``RECHECK`` bounds the wait for a node that ends without its
        output ending (a child it left behind holds the pipe open)."""
        remaining = set(range(len(self.nodes)))
        started = time.monotonic()
        while remaining:
            self.wake.wait(RECHECK if self.deadline is None
                           else max(0.0, min(RECHECK, self.deadline - time.monotonic())))
            self.wake.clear()
            if self.done.is_set():
                return CANCELLED
            if self.disk_full is not None:
                return State.FAILED.value, self.disk_full.reason, EXIT_JOB_FAILED
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.timed_out = True  # a limit is not a failure to retry
                return State.FAILED.value, f"max_runtime {self.plan.get('max_runtime_text')} reached", EXIT_JOB_FAILED
            failed = []
            for i in sorted(remaining):
                code = self.nodes[i].poll()
                if code is None and i in self.output_ended:
                    code = self.nodes[i].wait(OUTPUT_TO_EXIT)  # closing its output is its last act
                if code is None:
                    continue
                remaining.discard(i)
                self.store.set_node(self.job_id, i, exit_code=code)
                self.store.update_job(self.job_id, nodes_up=len(remaining))
                if code != 0:
                    failed.append((i, code))
            if failed:
                i, code = self.first_failure(failed, started)
                return State.FAILED.value, self.failure_reason(i, code), EXIT_JOB_FAILED
        return State.SUCCEEDED.value, "", EXIT_OK

    def first_failure(self, failed: List[Tuple[int, int]], started: float) -> Tuple[int, int]:
        """Of nodes found ended with an error at once, the one whose launcher reported a rank's
        failure first (the others' ranks usually fail because of it)."""
        for i, _ in failed:  # their last words are on their way: a node closes its output last
            deadline = time.monotonic() + OUTPUT_TO_EXIT
            while i not in self.output_ended and time.monotonic() < deadline:
                time.sleep(0.01)
        return min(failed, key=lambda f: (self.failures[f[0]].at or float("inf"), f[0]))

    def failure_reason(self, i: int, code: int) -> str:
        """``node 1 rank 1 exited with code 7: <its last lines>; see <log>``: which node and rank
        failed, its own exit code and its error first (``cloudtrain.launch.failure``)."""
        reader = self.failures.get(i) or FailureReader()
        reason = reader.reason(i)
        if reason is None:
            reason = f"node {i} exited with code {code}" if code > 0 else f"node {i} was killed by signal {-code}"
            if reader.last_word:
                reason += f": {reader.last_word[:300]}"
        return reason + f"; see {self.run_dir / f'node-{i}.log'}"

    def stop_all(self) -> None:
        threads = [threading.Thread(target=n.stop, args=(STOP_GRACE,)) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def on_signal(self, signum, frame) -> None:
        self.done.set()
        self.wake.set()

    def on_disk_full(self, error: DiskFull) -> DiskFull:
        """Fail the job for a full disk; the ``DiskFull`` it fails with (the first one met)."""
        if self.disk_full is None:
            self.disk_full = error
        self.wake.set()
        return self.disk_full

    def record_end(self, state: str, message: str, code: int) -> None:
        """The job's end in the store (and its run directory), however long a full disk takes to
        have room again; a SIGTERM meanwhile stops trying (``cancel`` then records it)."""
        self.done.clear()
        while True:
            try:
                self.store.finish_job(self.job_id, state, message=message, exit_code=code)
                return
            except DiskFull as exc:
                self.on_disk_full(exc)
                if not diskspace.give_back(self.run_dir) and self.done.wait(LAST_WORDS_RETRY):
                    return

    def await_row(self) -> bool:
        """The submitting process writes the job's row once this process has started (with its
        PID): wait for it.  False if it never comes (that process died first)."""
        deadline = time.monotonic() + ROW_TIMEOUT
        while self.store.get_job(self.job_id) is None:
            if time.monotonic() >= deadline or self.done.is_set():
                return False
            time.sleep(0.01)
        return True

    def start_watchdog(self) -> None:
        """Fork a watcher that outlives this process: when this process ends (even by SIGKILL)
        with the job not finished, it stops and removes what the job has (the provider's
        ``release``) and marks it FAILED, or CANCELLED if a cancel was on its way."""
        read_end, write_end = os.pipe()  # not inherited by the nodes (PEP 446)
        if os.fork() != 0:
            os.close(read_end)
            self._watchdog_pipe = write_end  # held open until this process ends
            return
        code = 0
        try:
            os.close(write_end)
            os.setsid()  # not in this process's group: a signal to it is not a signal to us
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.closerange(3, read_end)
            os.closerange(read_end + 1, 65536)
            while os.read(read_end, 64):
                pass
            watch_over(self.job_id, self.run_dir, os.getppid())
        except BaseException:
            code = 1
        finally:
            os._exit(code)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        if not self.await_row():
            self.sink.close()
            shutil.rmtree(self.run_dir, ignore_errors=True)  # no job was recorded: nothing half-made is left
            return EXIT_JOB_FAILED
        self.start_watchdog()
        state, message, code = State.FAILED.value, "", EXIT_JOB_FAILED
        try:
            self.prepare()
            attempts = 1 + int(self.plan.get("max_restarts") or 0)
            if self.plan.get("max_runtime"):  # the whole job's run time, restarts included
                self.deadline = time.monotonic() + float(self.plan["max_runtime"])
            for attempt in range(attempts):
                if self.done.is_set():
                    state, message, code = CANCELLED
                    break
                self.start(attempt)
                state, message, code = self.monitor()
                if state != State.FAILED.value or attempt + 1 == attempts or self.timed_out or self.disk_full:
                    break
                self.store.add_restart(self.job_id, attempt + 1, message)
                self.sink.note(f"{message}; restarting every node (restart {attempt + 1} of {attempts - 1})")
                self.stop_all()
                self.store.update_job(self.job_id, raw_state=f"RESTARTING {attempt + 1}")
        except Exception as exc:  # a broken start is the job's failure, with the reason kept
            state, code = State.FAILED.value, EXIT_JOB_FAILED
            message = "could not start the job: " + self.sink.mask(str(exc))
            if isinstance(exc, DiskFull) or diskspace.is_full(exc) or (  # shutil.Error: a list of them
                    isinstance(exc, OSError) and diskspace.nearly_full(self.run_dir)):
                message = self.on_disk_full(exc if isinstance(exc, DiskFull) else diskspace.full(self.run_dir)).reason
            elif self.done.is_set():
                state, message, code = CANCELLED
        finally:
            if state == State.CANCELLED.value:
                message = read_cancel_reason(self.run_dir) or message
            if state != State.SUCCEEDED.value:
                self.sink.note(f"stopping every node: {message or state.lower()}")
            self.stop_all()
            for t in threading.enumerate():
                if t is not threading.current_thread() and t.daemon:
                    t.join(timeout=2)
            try:
                self.cleanup()
            finally:
                if self.disk_full is not None:  # every node has stopped: the reserve is room to say why
                    diskspace.give_back(self.run_dir)
                self.sink.note(f"job {state.lower()}" + (f": {message}" if message else ""))
                self.sink.close()
                self.record_end(state, message, code)
                diskspace.give_back(self.run_dir)
                if self._watchdog_pipe is not None:  # the job is finished: the watchdog may go
                    os.close(self._watchdog_pipe)
                    self._watchdog_pipe = None
        return code


def watch_over(job_id: str, run_dir: Path, supervisor_pid: int) -> None:
    """The supervisor has ended: if the job is not finished, it was killed: release what the job
    has (its nodes' process groups, its containers and network) and say so."""
    store = Store()
    row = store.get_job(job_id)
    if row is None or row["state"] in TERMINAL:
        return
    from ..extend.plugins import get_provider
    provider = get_provider(row["provider"])
    # the nodes had SIGTERM when the supervisor died (PR_SET_PDEATHSIG): let them stop their
    # own children (Ray's processes live in groups of their own) before release forces them
    deadline = time.monotonic() + STOP_GRACE + 3
    for node in store.get_nodes(job_id):
        while node["pid"] and procs.same(node["pid"], node["pid_start"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    try:
        provider.release(job_id)
    finally:
        reason = read_cancel_reason(run_dir)
        if reason is not None:
            state, message, code = State.CANCELLED.value, reason, EXIT_INTERRUPTED
        else:
            state, message, code = (State.FAILED.value,
                                    f"the {row['provider']} supervisor (pid {row['supervisor_pid']}) "
                                    f"was killed; the job's nodes were stopped", EXIT_JOB_FAILED)
        if store.finish_job(job_id, state, message=message, exit_code=code):
            with open(run_dir / "job.log", "a", encoding="utf-8") as log:
                log.write(f"[cloudtrain] job {state.lower()}: {message}\n")
