"""Benchmark: the slurm provider on a real two-node Slurm on this machine (scripts/slurm-cluster.sh,
as the tests start it), side by side with Slurm's own commands (issue 42's goals):

- `submit`: `cloudtrain submit -p slurm --detach` of the digits job, wall from the command's start
  to its exit with the job id printed, against bare `sbatch --parsable` of the very script that
  cloudtrain submitted (read back from the workdir): goal <= 1.2 x.  cloudtrain's side includes
  packing and copying the code to the workdir, which a bare sbatch of a script does not do;
- time to the first training step (`epoch 1/N` in the job's output) of the digits job, from the
  command's start: `cloudtrain submit -p slurm --detach` (the line read from the job's log file)
  against bare `srun` running `torchrun` on both nodes (the line read from srun's output file):
  goal <= 1.05 x.

Both sides of a row run in the same rounds, the order rotating; every job is cancelled once
measured, and the next run waits until the queue is empty.  The cluster's daemons are stopped by
their PIDs at the end (the script's `stop`)."""
from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

from benchlib import BIN, EXAMPLE, REPO, Row, Stats, base_env, bin_first_on_path, compared, free_port, \
    rounds_order, show

SCRIPT = REPO / "scripts" / "slurm-cluster.sh"
JOB = "examples/digits-ddp/job.yaml"  # run from the repository's root
FIRST_STEP = re.compile(r"epoch 1/\d+")
SUBMIT_GOAL, FIRST_STEP_GOAL = 1.2, 1.05
BARE_NAME = "ct-bench-bare"
TIMEOUT = 240.0


class Cluster:
    def __init__(self, ctx):
        self.ctx = ctx
        self.dir = ctx.tmp / "slurm"
        self.dir.mkdir()
        done = subprocess.run(["bash", str(SCRIPT), "start", str(self.dir)], capture_output=True, text=True,
                              timeout=180)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"the test Slurm did not start: {done.stderr.strip()[-500:]}")
        self.env = bin_first_on_path(base_env(SLURM_CONF=str(self.dir / "slurm.conf"), OMP_NUM_THREADS="1"))

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "stop", str(self.dir)], capture_output=True, timeout=180)

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=120)

    def drain(self, job_id: Optional[str] = None, name: Optional[str] = None) -> None:
        """Cancel the job and wait until the queue is empty (its processes gone)."""
        if job_id:
            self.run("scancel", job_id)
        if name:
            self.run("scancel", "--name", name)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not self.run("squeue", "-h", "-o", "%i").stdout.strip():
                return
            time.sleep(0.2)
        raise RuntimeError("the test Slurm's queue never emptied")


def wait_for_line(path_glob, proc: subprocess.Popen, started: float) -> Optional[float]:
    """Seconds from ``started`` until a file matching ``path_glob()`` holds the first step, polled
    every 20 ms; None when ``proc`` failed or the time ran out."""
    deadline = started + TIMEOUT
    while time.perf_counter() < deadline:
        for path in path_glob():
            try:
                if FIRST_STEP.search(path.read_text(errors="replace")):
                    return time.perf_counter() - started
            except OSError:
                pass
        if proc.poll() not in (None, 0):
            return None
        time.sleep(0.02)
    return None


class SlurmRuns:
    def __init__(self, ctx, cluster: Cluster):
        self.ctx, self.cluster = ctx, cluster
        self.samples: Dict[str, List[float]] = {}
        self.failures: Dict[str, List[str]] = {}
        self.counter = 0
        self.script: Optional[Path] = None  # the script cloudtrain's last submit wrote

    def record(self, name: str, value: Optional[float], why: str = "") -> None:
        if value is None:
            self.failures.setdefault(name, []).append(why or "no measurement")
        else:
            self.samples.setdefault(name, []).append(value)
            self.ctx.log(f"    {name}: {value:.3f}s")

    def fresh(self) -> tuple:
        self.counter += 1
        home = self.ctx.tmp / f"home-{self.counter}"
        return home, self.ctx.tmp / f"wd-{self.counter}"

    def submit_argv(self, workdir: Path) -> List[str]:
        return [f"{BIN}/cloudtrain", "submit", "-p", "slurm", "--detach", JOB,
                f"--set=providers.slurm.workdir={workdir}"]

    def render_argv(self) -> List[str]:
        return [f"{BIN}/cloudtrain", "render", "-p", "slurm", JOB]

    # -- the CLI's own start, for the note: render of the same job calls no cluster command ---
    def cloudtrain_render(self) -> None:
        t0 = time.perf_counter()
        done = subprocess.run(self.render_argv(), capture_output=True, text=True, env=self.cluster.env, cwd=REPO,
                              timeout=TIMEOUT)
        wall = time.perf_counter() - t0
        self.record("cloudtrain render", wall if done.returncode == 0 else None, done.stderr.strip()[-300:])

    # -- submit: wall to the job id --------------------------------------------------------
    def cloudtrain_submit(self) -> None:
        home, workdir = self.fresh()
        env = dict(self.cluster.env, CLOUDTRAIN_HOME=str(home))
        t0 = time.perf_counter()
        done = subprocess.run(self.submit_argv(workdir), capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=TIMEOUT)
        wall = time.perf_counter() - t0
        m = re.search(r"slurm://(\d+)", done.stdout + done.stderr)
        self.cluster.drain(m.group(1) if m else None)
        scripts = sorted((workdir / "scripts").glob("*.sbatch")) if workdir.exists() else []
        if done.returncode != 0 or not m or not scripts:
            self.record("cloudtrain submit", None, (done.stderr.strip().splitlines() or ["no job id"])[-1])
            return
        self.script = scripts[0]
        self.record("cloudtrain submit", wall)

    def bare_sbatch(self) -> None:
        if self.script is None:
            self.record("sbatch", None, "no script: cloudtrain's submit failed first")
            return
        t0 = time.perf_counter()
        done = subprocess.run(["sbatch", "--parsable", str(self.script)], capture_output=True, text=True,
                              env=self.cluster.env, timeout=TIMEOUT)
        wall = time.perf_counter() - t0
        job = done.stdout.strip().split(";")[0]
        self.cluster.drain(job if job.isdigit() else None)
        self.record("sbatch", wall if done.returncode == 0 and job.isdigit() else None, done.stderr.strip())

    # -- the first training step -----------------------------------------------------------
    def cloudtrain_first_step(self) -> None:
        home, workdir = self.fresh()
        env = dict(self.cluster.env, CLOUDTRAIN_HOME=str(home))
        t0 = time.perf_counter()
        proc = subprocess.Popen(self.submit_argv(workdir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, cwd=REPO, text=True)
        value = wait_for_line(lambda: list((workdir / "logs").glob("*.out")) if workdir.exists() else [], proc, t0)
        out = proc.communicate(timeout=TIMEOUT)[0]
        m = re.search(r"slurm://(\d+)", out)
        self.cluster.drain(m.group(1) if m else None)
        self.record("cloudtrain submit (first step)", value, out.strip()[-300:])

    def bare_argv(self, port: int) -> List[str]:
        torchrun = (f"torchrun --nnodes=2 --nproc-per-node=2 --node-rank=$SLURM_NODEID "
                    f"--master-addr=127.0.0.1 --master-port={port} train.py --epochs 10")
        return ["srun", "--nodes=2", "--ntasks-per-node=1", f"--job-name={BARE_NAME}", "--output=srun.out",
                "bash", "-c", torchrun]

    def bare_first_step(self) -> None:
        self.counter += 1
        code = self.ctx.tmp / f"bare-{self.counter}"
        shutil.copytree(EXAMPLE, code, ignore=shutil.ignore_patterns("output", "__pycache__"))
        t0 = time.perf_counter()
        proc = subprocess.Popen(self.bare_argv(free_port(2)), cwd=code, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=self.cluster.env, text=True)
        value = wait_for_line(lambda: [code / "srun.out"], proc, t0)
        self.cluster.drain(name=BARE_NAME)
        out = proc.communicate(timeout=TIMEOUT)[0]
        self.record("srun torchrun (first step)", value, out.strip()[-300:])


def run(ctx) -> List[Row]:
    cluster = Cluster(ctx)
    try:
        runs = SlurmRuns(ctx, cluster)
        runs.cloudtrain_submit()  # warm-up (page cache, .pyc files) and the script the anchor submits
        runs.samples.clear()
        submit_rounds = 5 if ctx.quick else 11
        for r in range(submit_rounds):
            for step in rounds_order([runs.cloudtrain_submit, runs.bare_sbatch, runs.cloudtrain_render], r):
                step()
        step_rounds = 2 if ctx.quick else 4
        for r in range(step_rounds):
            for step in rounds_order([runs.cloudtrain_first_step, runs.bare_first_step], r):
                step()
    finally:
        cluster.stop()
    submit_cmd = show(runs.submit_argv(Path("$WORKDIR")), REPO)
    render = Stats(runs.samples.get("cloudtrain render", []))
    render_note = (f"; `{show(runs.render_argv())}` of the same job, which calls no cluster command, takes "
                   f"{render.median_text()} (median, n={render.n}) in the same rounds: the CLI's own start"
                   if render.samples else "")
    return [
        compared("slurm", "`submit` of the digits job to the local two-node Slurm: wall to the job id vs bare "
                 "`sbatch` of the same script", [submit_cmd],
                 Stats(runs.samples.get("cloudtrain submit", [])),
                 ["sbatch --parsable $WORKDIR/scripts/<spec-hash>.sbatch"], Stats(runs.samples.get("sbatch", [])),
                 f"≤ {SUBMIT_GOAL} × sbatch", lambda x: x <= SUBMIT_GOAL,
                 failures=runs.failures.get("cloudtrain submit", []), alt_failures=runs.failures.get("sbatch", []),
                 alt_name="sbatch", name="cloudtrain submit",
                 note="cloudtrain's side packs the code (sha256-named archive) and copies it to the workdir, "
                      "reads the cluster for an earlier submit of the same job (the comment), writes the script, "
                      "then runs sbatch and reads the job back; bare sbatch submits a script already on disk"
                      + render_note),
        compared("slurm", "digits DDP 2 nodes × 2 ranks on the local Slurm: command start to the first "
                 "training step (`epoch 1/10` in the job's output)", [submit_cmd],
                 Stats(runs.samples.get("cloudtrain submit (first step)", [])),
                 [show(runs.bare_argv(0), EXAMPLE).replace("--master-port=0", "--master-port=$PORT")],
                 Stats(runs.samples.get("srun torchrun (first step)", [])),
                 f"≤ {FIRST_STEP_GOAL} × srun torchrun", lambda x: x <= FIRST_STEP_GOAL,
                 failures=runs.failures.get("cloudtrain submit (first step)", []),
                 alt_failures=runs.failures.get("srun torchrun (first step)", []),
                 alt_name="srun torchrun", name="cloudtrain submit",
                 note="cloudtrain's line is read from the job's log file (sbatch --output), srun's from "
                      "srun --output: both polled every 20 ms"),
    ]

