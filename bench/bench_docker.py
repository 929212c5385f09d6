"""Benchmark 5: the digits DDP job (2 nodes x 2 processes, 10 epochs) through
`cloudtrain submit -p docker` against `cloudtrain submit -p local`, and against TorchX's
`local_docker` scheduler on the same local image.

Every run uses its own copy of examples/digits-ddp, a fresh CLOUDTRAIN_HOME and TMPDIR, and the
same environment (OMP_NUM_THREADS=1 as the job file sets, GLOO_SOCKET_IFNAME=lo for the local
provider's processes; containers get only the job's environment). The variants of one round run
one after the other, in an order that rotates every round.

Docker's own overhead is broken down from the store's timestamps (created_at, started_at,
ended_at), the Docker engine's events for the job's network and containers (create, start, die,
destroy: `docker events --since --until`, nanosecond times) and the arrival of the job's first
log line. After every run and at the end the engine is checked for containers and networks
labelled `cloudtrain.job`, which the job's supervisor must have removed.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from benchlib import BIN, EXAMPLE, Proc, Rounds, Row, RunResult, Stats, base_env, bin_first_on_path, \
    cancel_submitted, find_torchx, run_procs, show, store_times
from bench_launch import FIRST_STEP

IMAGE = "cloudtrain/test-python:latest"
GOAL = 1.3
TIMEOUT = 300.0
NODE_LINE = r"^\[node\d+/rank\d+\] "
TORCHX_LABEL = "torchx.pytorch.org/app-id"
VARIANTS = ("docker", "local", "torchx")


@dataclass
class Sample:
    wall: float
    first_step: Optional[float]
    round: int = -1
    # seconds since the command started (cloudtrain variants)
    first_line: Optional[float] = None   # the job's first output line arrives
    last_line: Optional[float] = None    # the job's last output line arrives
    created: Optional[float] = None      # store: created_at (the job is recorded)
    started: Optional[float] = None      # store: started_at (every node started)
    ended: Optional[float] = None        # store: ended_at
    events: Dict[str, object] = field(default_factory=dict)  # docker: engine events, same clock
    leftovers: int = 0                   # docker: containers + networks of the job still there at exit

    # the intervals of the breakdown, each None when a timestamp is missing
    def span(self, a: str, b: str) -> Optional[float]:
        x, y = self.point(a), self.point(b)
        return None if x is None or y is None else y - x

    def point(self, name: str) -> Optional[float]:
        if name == "start":
            return 0.0
        if name == "exit":
            return self.wall
        if name in ("first_line", "last_line", "created", "started", "ended", "first_step"):
            return getattr(self, name)
        value = self.events.get(name)
        return value if isinstance(value, float) else None


def docker(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def labelled(label: str) -> Dict[str, List[str]]:
    """Containers and networks carrying ``label`` (``key`` or ``key=value``): names."""
    out = {}
    for kind, cmd in (("containers", ["ps", "-a"]), ("networks", ["network", "ls"])):
        cp = docker(*cmd, "--filter", f"label={label}", "--format", "{{.Names}}" if kind == "containers"
                    else "{{.Name}}")
        out[kind] = [x for x in cp.stdout.split() if x]
    return out


def engine_events(since: float, until: float, job_id: str) -> Dict[str, object]:
    """The job's network and container events, in seconds since ``since``: net_create,
    create_<i>, start_<i>, die_<i>, destroy_<i>, net_destroy."""
    cp = docker("events", "--since", f"{since:.6f}", "--until", f"{until + 0.5:.6f}", "--format",
                "{{json .}}")
    out: Dict[str, object] = {}
    for line in cp.stdout.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        attrs = (ev.get("Actor") or {}).get("Attributes") or {}
        t = ev.get("timeNano", 0) / 1e9 - since
        action = ev.get("Action", "")
        if ev.get("Type") == "container" and attrs.get("cloudtrain.job") == job_id:
            if action in ("create", "start", "die", "destroy"):
                out.setdefault(f"{action}_{attrs.get('cloudtrain.node', '?')}", t)
        elif ev.get("Type") == "network" and attrs.get("name") == f"ct-{job_id}" and action in ("create", "destroy"):
            out.setdefault(f"net_{action}", t)
    nodes = sorted({k.split("_", 1)[1] for k in out if k.startswith("create_")})
    for action, pick in (("create", min), ("start", max), ("die", max), ("destroy", max)):
        values = [out[f"{action}_{n}"] for n in nodes if f"{action}_{n}" in out]
        if values:
            out[f"{action}_{pick.__name__}"] = pick(values)  # e.g. create_min, start_max
    if "create_0" in out and "start_0" in out:  # the engine's create and start of every container
        out["per_start"] = [out[f"start_{n}"] - out[f"create_{n}"] for n in nodes if f"start_{n}" in out]
        prev = [out.get("net_create")] + [out.get(f"start_{n}") for n in nodes[:-1]]
        out["per_create"] = [out[f"create_{n}"] - p for n, p in zip(nodes, prev) if p is not None]
    return out


class DockerRuns(Rounds):
    def __init__(self, ctx):
        super().__init__(ctx)
        self.torchx = find_torchx(ctx.log)
        self.counter = 0
        self.job_ids: List[str] = []
        self.torchx_note = ""
        self.torchx_before = set(labelled(TORCHX_LABEL)["containers"])
        self.torchx_network_before = bool(docker("network", "inspect", "torchx").returncode == 0)

    # -- commands ------------------------------------------------------------------------
    def commands(self, variant: str, workdir: Path, home: Path, tmpdir: Path) -> List[Proc]:
        env = base_env(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", TMPDIR=str(tmpdir))
        if variant in ("docker", "local"):
            env["CLOUDTRAIN_HOME"] = str(home)
            return [Proc([f"{BIN}/cloudtrain", "submit", "-p", variant, "job.yaml"], str(workdir), env)]
        # TorchX: no workspace (else it builds an image of it on top of --image), the code
        # bind-mounted where cloudtrain's docker provider mounts it; everything else default.
        return [Proc([self.torchx.exe or "torchx", "run", "--workspace", "", "-s", "local_docker", "dist.ddp",
                      "-j", "2x2", "--image", IMAGE, "--mounts", f"type=bind,src={workdir},dst=/workspace",
                      "--script", "/workspace/train.py", "--", "--epochs", "10"], str(workdir),
                     bin_first_on_path(env))]

    def display(self, variant: str) -> List[str]:
        p = self.commands(variant, EXAMPLE, Path("/tmp/home"), Path("/tmp"))[0]
        if variant == "torchx":
            p.argv[0] = "torchx"
            return [show(p.argv, EXAMPLE).replace(str(EXAMPLE), "$PWD")]
        return [show(p.argv, EXAMPLE, {"CLOUDTRAIN_HOME": "$(mktemp -d)"}).replace("'$(mktemp -d)'", "$(mktemp -d)")]

    # -- one run ---------------------------------------------------------------------------
    def run_one(self, variant: str, record: bool = True, round_index: int = -1) -> Optional[Sample]:
        self.counter += 1
        base = self.ctx.tmp / f"docker-{self.counter}"
        workdir, home, tmpdir = base / "digits-ddp", base / "home", base / "tmp"
        shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("output", "__pycache__"))
        tmpdir.mkdir()
        procs = self.commands(variant, workdir, home, tmpdir)
        started = time.time()
        result = run_procs(procs, TIMEOUT, on_timeout=lambda r: cancel_submitted(r, procs[0]))
        finished = started + result.wall
        ok = result.ok and result.find(r"test_accuracy 0\.9") is not None
        sample = Sample(result.wall, result.first(FIRST_STEP), round_index)
        lines = [t for t, _, text in result.lines if _matches(NODE_LINE, text)]
        if lines:
            sample.first_line, sample.last_line = lines[0], lines[-1]
        job_id = None
        if variant in ("docker", "local"):
            m = result.find(rf"submitted {variant}://(\S+)")
            job_id = m.group(1) if m else None
            sample.created, sample.started, sample.ended = (
                None if t is None else t - started for t in store_times(home, "created_at", "started_at", "ended_at"))
        if variant == "docker" and job_id:
            self.job_ids.append(job_id)
            left = labelled(f"cloudtrain.job={job_id}")
            sample.leftovers = len(left["containers"]) + len(left["networks"])
            if sample.leftovers:
                self.ctx.log(f"    docker job {job_id} left {left} behind")
            sample.events = engine_events(started, finished, job_id)
        if variant == "torchx":
            self._remove_torchx(result)
        if not ok:
            self.fail(variant, f"docker-bench-{variant}", result, home)
        shutil.rmtree(base, ignore_errors=True)
        if not ok:
            return None
        if record:
            self.samples.setdefault(variant, []).append(sample)
        extra = ""
        if variant != "torchx" and sample.started is not None and sample.first_line is not None:
            extra = (f", recorded {sample.created:.2f}s, nodes started {sample.started:.2f}s, "
                     f"first line {sample.first_line:.2f}s")
        self.ctx.log(f"    {variant}: {sample.wall:.2f}s, first step {sample.first_step or float('nan'):.2f}s{extra}")
        return sample

    def _remove_torchx(self, result: RunResult) -> None:
        """TorchX leaves its exited containers: remove the ones this run made."""
        m = result.find(r"local_docker://torchx/(\S+)")
        if m:
            ids = docker("ps", "-aq", "--filter", f"label={TORCHX_LABEL}={m.group(1)}").stdout.split()
        else:  # no handle printed: whatever appeared since the benchmark started
            now = labelled(TORCHX_LABEL)["containers"]
            ids = [n for n in now if n not in self.torchx_before]
        if ids:
            docker("rm", "-f", *ids)

    def finish(self) -> None:
        if not self.torchx_network_before:  # the `torchx` network ensure_network() made (if unused)
            docker("network", "rm", "torchx")


def _matches(pattern: str, text: str) -> bool:
    import re
    return re.search(pattern, text) is not None


def torchx_dryrun(runs: DockerRuns) -> str:
    """Does TorchX's local_docker render the job with the local image, without pulling or building?"""
    if not runs.torchx:
        return f"torchx: {runs.torchx.failure}"
    env = base_env()
    plain = subprocess.run([runs.torchx.exe, "run", "--dryrun", "-s", "local_docker", "dist.ddp", "-j", "2x2",
                            "--script", "train.py"], cwd=str(EXAMPLE), env=env, capture_output=True, text=True,
                           timeout=120)
    argv = runs.commands("torchx", EXAMPLE, Path("/tmp/home"), Path("/tmp"))[0].argv
    local = subprocess.run(argv[:2] + ["--dryrun"] + argv[2:], cwd=str(EXAMPLE), env=env, capture_output=True,
                           text=True, timeout=120)
    notes = []
    text = plain.stdout + plain.stderr
    if plain.returncode != 0:
        last = [x for x in text.splitlines() if x.strip()][-1:] or [f"exit {plain.returncode}"]
        building = "Building workspace docker image" in text
        notes.append("`torchx run --dryrun -s local_docker dist.ddp -j 2x2 --script train.py` (defaults) fails: "
                     + ("even a dry run pulls its default image and builds a workspace image on top of it; "
                        if building else "") + f"`{last[0].strip()[:160]}`")
    text = local.stdout + local.stderr
    notes.append(f"with `--workspace \"\" --image {IMAGE}` the dry run "
                 + ("succeeds (no build)" if local.returncode == 0 else f"fails: {text.strip()[-160:]}"))
    return "; ".join(notes)


def run(ctx) -> List[Row]:
    check = docker("image", "inspect", IMAGE)
    if check.returncode != 0:
        raise RuntimeError(f"{IMAGE} is not on this machine (bash scripts/build-test-image.sh builds it)")
    runs = DockerRuns(ctx)
    ctx.shared["docker"] = runs
    dry = torchx_dryrun(runs)
    ctx.log(f"  torchx local_docker dry run: {dry}")
    wanted = ["docker", "local"] + (["torchx"] if runs.torchx else [])
    try:
        if not ctx.quick:
            ctx.log("  warm-up run (not counted): docker")
            runs.run_one("docker", record=False)
        runs.run_rounds(wanted, min_rounds=2 if ctx.quick else 3, max_rounds=2 if ctx.quick else 5,
                        deadline=ctx.deadline - ctx.reserve_after("docker"))
    finally:
        runs.finish()
    left = labelled("cloudtrain.job")
    ours = [n for n in left["containers"] + left["networks"] if any(j in n for j in runs.job_ids)]
    return rows(ctx, runs, dry, left, ours)


BREAKDOWN = [  # (label, start point, end point, for local too)
    ("command start → the job is recorded (store `created_at`: CLI imports, render, image check, bundle)",
     "start", "created", True),
    ("`created_at` → the job's network is created (supervisor start, imports, code copied per node)",
     "created", "net_create", False),
    ("network created → node 0's container created", "net_create", "create_0", False),
    ("node 0: container created → started (engine)", "create_0", "start_0", False),
    ("node 0 started → node 1's container created", "start_0", "create_1", False),
    ("node 1: container created → started (engine)", "create_1", "start_1", False),
    ("last container started → store `started_at`", "start_max", "started", False),
    ("`created_at` → `started_at` (every node started)", "created", "started", True),
    ("`started_at` → the job's first log line arrives (in-node start-up: launcher, torchrun, torch import, "
     "rendezvous)", "started", "first_line", True),
    ("first log line → first training step (`epoch 1/`)", "first_line", "first_step", True),
    ("first training step → the job's last log line", "first_step", "last_line", True),
    ("last log line → last container exits (engine `die`: process group teardown, torchrun exit)",
     "last_line", "die_max", False),
    ("last container exited → network removed (containers and network removed)", "die_max", "net_destroy", False),
    ("network removed → store `ended_at`", "net_destroy", "ended", False),
    ("last log line → store `ended_at`", "last_line", "ended", True),
    ("`ended_at` → `cloudtrain submit` exits", "ended", "exit", True),
    ("wall time", "start", "exit", True),
]


def _cell(st: Optional[Stats]) -> str:
    if not st:
        return "—"
    return f"{st.median:.3f} ({st.min:.3f} – {st.max:.3f})"


def rows(ctx, runs: DockerRuns, dry: str, left: Dict[str, List[str]], ours: List[str]) -> List[Row]:
    out: List[Row] = []
    wall = lambda s: s.wall  # noqa: E731
    out.append(runs.compared("docker", "digits DDP 2x2 (nodes x procs), 10 epochs: wall time, `submit -p docker` vs "
                             "`submit -p local`", "docker", "local", wall, runs.display("docker"),
                             runs.display("local"), f"≤ {GOAL} × local", lambda r: r <= GOAL))
    tx_note = ("TorchX pulls `--image` before every run (no registry here: the pull fails at once and it "
               "falls back to the local image), runs torchrun with c10d rendezvous, leaves its exited "
               "containers (removed by the benchmark) and polls the app's state once a second; " + dry)
    out.append(runs.compared("docker", "digits DDP 2x2: wall time, `submit -p docker` vs TorchX `local_docker` "
                             "(same local image, code bind-mounted)", "docker", "torchx", wall,
                             runs.display("docker"), runs.display("torchx"), "— (reference)",
                             alt_failures=[] if runs.torchx else [runs.torchx.failure], note=tx_note))
    first = lambda s: s.first_step  # noqa: E731
    out.append(runs.compared("docker", "digits DDP 2x2: time to first training step (`epoch 1/` line arrives), "
                             "docker vs local", "docker", "local", first, ["(same commands as above)"],
                             ["(same commands as above)"]))
    for what, x, y in (("`created_at` → `started_at`: every node started (docker: network, containers "
                        "created and started one after the other)", "created", "started"),
                       ("`started_at` → the job's first log line (in-node start-up)", "started", "first_line"),
                       ("the job's last log line → `ended_at` (nodes exit, clean-up)", "last_line", "ended")):
        fn = lambda s, x=x, y=y: s.span(x, y)  # noqa: E731
        out.append(runs.compared("docker", f"digits DDP 2x2: cloudtrain's own latency, docker vs local: {what}",
                                 "docker", "local", fn, ["(same command as above)"], ["(same command as above)"]))
    leftovers = sum(s.leftovers for s in runs.samples.get("docker", []))
    all_left = left["containers"] + left["networks"]
    out.append(Row("docker", "no container or network labelled `cloudtrain.job` left (after each run's "
                   "`submit` exits, and after the benchmark)",
                   ["docker ps -a --filter label=cloudtrain.job; docker network ls --filter label=cloudtrain.job"],
                   Stats([float(len(all_left))], ""), goal="0 left", passed=not all_left and not leftovers,
                   note=f"{len(runs.job_ids)} docker jobs checked; left at submit's exit: {leftovers}; "
                        f"after the benchmark: {len(all_left)}"
                        + (f" ({', '.join(all_left[:6])}; of this benchmark's jobs: {len(ours)})" if all_left else "")))

    # the breakdown, for the details under the table
    n = len(runs.samples.get("docker", []))
    lines = [f"**Docker vs local, where the time goes** (digits DDP 2 × 2, seconds, median (min – max) of {n} "
             "interleaved runs each; times from the store, the engine's events and the arrival of the output "
             "lines at the runner; each interval's median is over the runs' own intervals, so the rows need not "
             "add up):", "",
             "| interval | docker | local |", "|---|---:|---:|"]
    for label, x, y, both in BREAKDOWN:
        fn = lambda s, x=x, y=y: s.span(x, y)  # noqa: E731
        lines.append(f"| {label} | {_cell(runs.stats('docker', fn))} | "
                     f"{_cell(runs.stats('local', fn)) if both else '—'} |")
    creates = [v for s in runs.samples.get("docker", []) for v in s.events.get("per_create", [])]
    starts = [v for s in runs.samples.get("docker", []) for v in s.events.get("per_start", [])]
    if creates and starts:
        lines += ["", f"Per container (both nodes, every run): engine create {_cell(Stats(creates))} s, "
                      f"engine start {_cell(Stats(starts))} s."]
    if runs.torchx and runs.samples.get("torchx"):
        tx_first = runs.stats("torchx", first)
        lines += ["", f"TorchX `local_docker`: wall {_cell(runs.stats('torchx', wall))} s; first `epoch 1/` line "
                      f"at {_cell(tx_first)} s (its log tail shows the containers' output in bursts: torchrun's "
                      "`--tee` output in a container without `PYTHONUNBUFFERED` is block-buffered, so this is "
                      "not when the step ran)."]
    ctx.details.append("\n".join(lines))
    return out
