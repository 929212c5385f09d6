"""The detached process that runs one local job: ``python -m cloudtrain_local.supervisor RUN_DIR``.

It copies the code for every node, starts each node's ``cloudtrain launch`` in its own
process group, writes node- and rank-prefixed logs, records states in the store, stops
every node as soon as one fails (fail fast), and stops them all on SIGTERM (cancel).
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

from cloudtrain.secrets import Masker
from cloudtrain.store import Store

# torchrun --tee prefixes "[default<local_rank>]:", mpirun --tag-output "[<job>,<rank>]<stdout>:"
TORCHRUN_TAG = re.compile(r"^\[default(\d+)\]:")
MPI_TAG = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:")
IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".venv", "venv", ".tox", ".pytest_cache",
                                 ".mypy_cache", "output")
STOP_GRACE = 5.0


def _die_with_parent() -> None:
    """Node processes get SIGTERM if the supervisor is killed outright (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LogSink:
    """Writes every node line to job.log (prefixed), node-<i>.log and node-<i>/rank-<r>.log."""

    def __init__(self, run_dir: Path, nodes: int, nproc: int, mask: Masker):
        self.run_dir, self.nproc, self.mask = run_dir, nproc, mask
        self.lock = threading.Lock()
        self.job_log = open(run_dir / "job.log", "a", encoding="utf-8", buffering=1)
        self.node_logs = [open(run_dir / f"node-{i}.log", "a", encoding="utf-8", buffering=1) for i in range(nodes)]
        self.rank_logs: Dict[int, object] = {}
        self.partial: Dict[int, str] = {}  # mpirun tags every write, so a rank's line may come in pieces

    def _rank_log(self, node: int, rank: int):
        f = self.rank_logs.get(rank)
        if f is None:
            path = self.run_dir / f"node-{node}" / f"rank-{rank}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            f = self.rank_logs[rank] = open(path, "a", encoding="utf-8", buffering=1)
        return f

    def write(self, node: int, line: str, distribution: str) -> None:
        if distribution in ("mpi", "horovod"):
            self._write_mpi(node, line)
            return
        line = line.rstrip("\n")
        rank: Optional[int] = None
        m = TORCHRUN_TAG.match(line) if distribution in ("ddp", "deepspeed") else None
        if m:
            rank = int(m.group(1)) + node * self.nproc
            line = line[m.end():]
        elif distribution in ("ps-worker", "none", "ray"):
            rank = node
        self._emit(node, rank, line)

    def _write_mpi(self, node: int, raw: str) -> None:
        """``[1,3]<stdout>:ra`` ``[1,3]<stdout>:nk 3\n`` -> one line of rank 3."""
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
        line = self.mask(line)
        prefix = f"[node{node}/rank{rank}] " if rank is not None else f"[node{node}] "
        with self.lock:
            self.job_log.write(prefix + line + "\n")
            self.node_logs[node].write(line + "\n")
            if rank is not None:
                self._rank_log(node, rank).write(line + "\n")

    def note(self, text: str) -> None:
        with self.lock:
            self.job_log.write(f"[cloudtrain] {text}\n")

    def close(self) -> None:
        for rank, rest in sorted(self.partial.items()):
            if rest:
                self._emit(rank // self.nproc, rank, rest)
        self.partial.clear()
        for f in [self.job_log, *self.node_logs, *self.rank_logs.values()]:
            f.close()


class Supervisor:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.plan = json.loads((run_dir / "plan.json").read_text())
        self.job_id = self.plan["job_id"]
        self.store = Store()
        names = [n for n in os.environ.get("CLOUDTRAIN_SECRET_NAMES", "").split(",") if n]
        self.secrets = {n: os.environ[n] for n in names if n in os.environ}
        first = self.plan["nodes"][0]
        self.distribution = _arg(first["argv"], "--type") or "ddp"
        nproc = int(_arg(first["argv"], "--nproc-per-node") or 1)
        self.sink = LogSink(run_dir, len(self.plan["nodes"]), nproc, Masker(self.secrets.values()))
        self.procs: List[subprocess.Popen] = []
        self.cancelled = False
        self.done = threading.Event()

    def prepare(self) -> None:
        for spec in self.plan["nodes"]:
            if self.plan["copy_code"]:
                shutil.copytree(self.plan["code"], spec["cwd"], ignore=IGNORED, symlinks=True)
        (self.run_dir / "output").mkdir(exist_ok=True)

    def start(self, attempt: int = 0) -> None:
        base = {k: v for k, v in os.environ.items() if k not in self.secrets and k != "CLOUDTRAIN_SECRET_NAMES"}
        self.procs = []
        for spec in self.plan["nodes"]:
            env = dict(base)
            env.update(spec["env"])
            env.update(self.secrets)
            env["CLOUDTRAIN_RESTART_COUNT"] = str(attempt)
            proc = subprocess.Popen(spec["argv"], cwd=spec["cwd"], env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_die_with_parent)
            self.procs.append(proc)
            self.store.set_node(self.job_id, spec["node"], pid=proc.pid, exit_code=None)
            threading.Thread(target=self._pump, args=(spec["node"], proc), daemon=True).start()
        self.store.update_job(self.job_id, state="RUNNING", raw_state="RUNNING", started_at=time.time(),
                              nodes_up=len(self.procs))

    def _pump(self, node: int, proc: subprocess.Popen) -> None:
        for raw in iter(proc.stdout.readline, b""):
            self.sink.write(node, raw.decode("utf-8", "replace"), self.distribution)

    def drop_raw_logs(self) -> None:
        """torchrun's own per-rank files (--tee needs them) are unmasked: only ours are kept."""
        for spec in self.plan["nodes"]:
            shutil.rmtree(self.run_dir / f"node-{spec['node']}" / "torchrun", ignore_errors=True)

    def stop_all(self) -> None:
        live = [p for p in self.procs if p.poll() is None]
        for p in live:
            _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline and any(p.poll() is None for p in live):
            time.sleep(0.05)
        for p in self.procs:
            _signal_group(p.pid, signal.SIGKILL)  # also reaps grandchildren left in the group
            p.wait()

    def on_sigterm(self, signum, frame) -> None:
        self.cancelled = True
        self.done.set()

    def monitor(self) -> tuple:
        """Wait for every node; return (state, message, exit_code)."""
        remaining = set(range(len(self.procs)))
        while remaining:
            if self.done.wait(0.1):
                return "CANCELLED", "cancelled", 130
            for i in sorted(remaining):
                code = self.procs[i].poll()
                if code is None:
                    continue
                remaining.discard(i)
                self.store.set_node(self.job_id, i, exit_code=code)
                self.store.update_job(self.job_id, nodes_up=len(remaining))
                if code != 0:
                    reason = f"node {i} exited with code {code}"
                    if code < 0:
                        reason = f"node {i} was killed by signal {-code}"
                    return "FAILED", reason + f"; see {self.run_dir / f'node-{i}.log'}", 1
        return "SUCCEEDED", "", 0

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_sigterm)
        signal.signal(signal.SIGINT, self.on_sigterm)
        state, message, code = "FAILED", "", 1
        try:
            self.prepare()
            attempts = 1 + int(self.plan.get("max_restarts") or 0)
            for attempt in range(attempts):
                if self.done.is_set():
                    break
                self.start(attempt)
                state, message, code = self.monitor()
                if state != "FAILED" or attempt + 1 == attempts:
                    break
                self.sink.note(f"{message}; restarting every node (restart {attempt + 1} of {attempts - 1})")
                self.stop_all()
                self.store.update_job(self.job_id, raw_state=f"RESTARTING {attempt + 1}")
        except Exception as exc:  # a broken start is the job's failure, with the reason kept
            state, message, code = "FAILED", f"could not start the job: {exc}", 1
            if self.cancelled:
                state, message, code = "CANCELLED", "cancelled", 130
        finally:
            if state != "SUCCEEDED":
                self.sink.note(f"stopping every node: {message or state.lower()}")
            self.stop_all()
            for t in threading.enumerate():
                if t is not threading.current_thread() and t.daemon:
                    t.join(timeout=2)
            self.sink.note(f"job {state.lower()}" + (f": {message}" if message else ""))
            self.sink.close()
            self.drop_raw_logs()
            self.store.finish_job(self.job_id, state, message=message, exit_code=code)
        return code


def _arg(argv: List[str], flag: str) -> Optional[str]:
    try:
        return argv[argv.index(flag) + 1]
    except (ValueError, IndexError):
        return None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> int:
    return Supervisor(Path(sys.argv[1])).run()


if __name__ == "__main__":
    sys.exit(main())
