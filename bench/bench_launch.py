"""Benchmarks 2 and 3: the digits DDP job through `cloudtrain submit -p local`, bare `torchrun`
and `torchx run -s local_cwd`: wall time, time to the first training step, and steps/s.

Every run uses its own copy of examples/digits-ddp (so nothing is written into the repo), a
fresh CLOUDTRAIN_HOME, a free master port, and the same environment (OMP_NUM_THREADS=1 as the
job file sets, GLOO_SOCKET_IFNAME=lo). The variants of one round run one after the other, in an
order that rotates every round.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from cloudtrain.launch.failure import RESULT_FD, SHIM
from benchlib import BIN, EXAMPLE, Proc, Rounds, Row, Torchx, base_env, bin_first_on_path, cancel_submitted, \
    find_torchx, free_port, rounds_order, run_procs, show, store_times

EPOCHS = "10"  # what examples/digits-ddp/job.yaml runs
FIRST_STEP = r"epoch 1/\d+"
LAST_LINE = r"saved model\.pt"  # rank 0's last line: what follows is the ranks' and torchrun's exit
STEPS_PER_SEC = r"steps_per_sec ([0-9.]+)"
WALL_GOAL = 1.03  # issue 27: within 1.03 x bare torchrun (it was 1.05 until the shim exited sooner)
THROUGHPUT_GOAL = 0.98
THROUGHPUT_EPOCHS = "30"  # about 3 s of training per run (the job file's 10: under 1 s)
TIMEOUT = 240.0


@dataclass
class Variant:
    name: str        # e.g. "cloudtrain 1x2"
    tool: str        # cloudtrain | torchrun | torchrun-tee | shim | torchx
    nodes: int
    procs: int
    epochs: str = EPOCHS

    @property
    def shape(self) -> str:
        return f"{self.nodes}x{self.procs}"


def variants(torchx: Torchx) -> List[Variant]:
    out = []
    for nodes, procs in ((1, 2), (2, 1)):
        out.append(Variant(f"cloudtrain {nodes}x{procs}", "cloudtrain", nodes, procs))
        out.append(Variant(f"torchrun {nodes}x{procs}", "torchrun", nodes, procs))
        if torchx:
            out.append(Variant(f"torchx {nodes}x{procs}", "torchx", nodes, procs))
    # where the rest of cloudtrain's overhead goes: torchrun as the launcher runs it, with the
    # per-rank log lines (--tee 3 --log-dir), whose tailer threads poll and stop rank by rank
    out.append(Variant("torchrun --tee 1x2", "torchrun-tee", 1, 2))
    # and torchrun exactly as the node's launcher runs it: through the failure shim, whose exit
    # skips the collections of torch's heap (cloudtrain.launch.failure)
    out.append(Variant("torchrun via the shim 1x2", "shim", 1, 2))
    return out


def commands(v: Variant, workdir: Path, home: Path, torchx: Optional[str], port: str) -> List[Proc]:
    env = base_env(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", TMPDIR=str(workdir / "tmp"))
    if v.tool == "cloudtrain":
        env["CLOUDTRAIN_HOME"] = str(home)
        argv = [f"{BIN}/cloudtrain", "submit", "-p", "local", "job.yaml",
                "--set", f"distribution.nodes={v.nodes}", "--set", f"distribution.procs_per_node={v.procs}"]
        if v.epochs != EPOCHS:
            argv += ["--set", f"command=python train.py --epochs {v.epochs}"]
        return [Proc(argv, str(workdir), env)]
    if v.tool in ("torchrun", "torchrun-tee", "shim"):
        tee, torchrun = [], [f"{BIN}/torchrun"]
        if v.tool != "torchrun":  # as the launcher runs it (unbuffered: lines as they come)
            tee = ["--tee", "3", "--log-dir", "tmp/torchrun"]
            env["PYTHONUNBUFFERED"] = "1"
        if v.tool == "shim":  # its report goes to fd 3 (here /dev/null), as the launcher's pipe
            env[RESULT_FD] = "3"
            torchrun = ["sh", "-c", 'exec "$@" 3>/dev/null', "sh", f"{BIN}/python", "-c", SHIM]
        return [Proc([*torchrun, "--nnodes", str(v.nodes), "--nproc-per-node", str(v.procs),
                      "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", port, *tee,
                      "train.py", "--epochs", v.epochs], str(workdir), env)
                for rank in range(v.nodes)]
    argv = [torchx or "torchx", "run", "-s", "local_cwd", "dist.ddp", "-j", v.shape]
    if v.nodes > 1:
        argv += ["--rdzv_port", port]
    return [Proc(argv + ["--script", "train.py", "--", "--epochs", v.epochs], str(workdir), bin_first_on_path(env))]


def display(v: Variant) -> List[str]:
    """The commands as a person types them, from examples/digits-ddp."""
    if v.tool == "shim":
        return ["(as the torchrun command with `--tee 3 --log-dir tmp/torchrun`, run as `python -c "
                "\"$SHIM\" ARGS` with `CLOUDTRAIN_RESULT_FD=3`: `cloudtrain.launch.failure.SHIM`)"]
    out = []
    procs = commands(v, EXAMPLE, Path("/tmp/home"), "torchx", "$PORT")
    for i, p in enumerate(procs):
        extra = {"CLOUDTRAIN_HOME": "$(mktemp -d)"} if v.tool == "cloudtrain" else None
        text = show(p.argv, EXAMPLE, extra).replace("'$PORT'", "$PORT").replace("'$(mktemp -d)'", "$(mktemp -d)")
        out.append(text + (" &" if len(procs) > 1 and i < len(procs) - 1 else ""))
    return out


@dataclass
class Sample:
    wall: float
    first_step: Optional[float]
    steps_per_sec: Optional[float]
    round: int = -1
    exit_tail: Optional[float] = None    # rank 0's last line -> the last process exited
    to_nodes: Optional[float] = None     # cloudtrain: command start -> supervisor started the nodes
    end_to_exit: Optional[float] = None  # cloudtrain: job ended (store) -> `submit` exited


def round_order(wanted: List[Variant], r: int) -> List[Variant]:
    """One round: the variants of one shape run back to back (so that a comparison's runs see
    the same load), rotated within the shape every round; the shapes alternate too."""
    shapes = list(dict.fromkeys(v.shape for v in wanted))
    out: List[Variant] = []
    for shape in rounds_order(shapes, r):
        out += rounds_order([v for v in wanted if v.shape == shape], r)
    return out


class DDPRuns(Rounds):
    """Samples of every variant, shared by the launch-overhead and throughput benchmarks."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.torchx = find_torchx(ctx.log)
        self.counter = 0

    def run_one(self, v: Variant, record: bool = True, round_index: int = -1) -> Optional[Sample]:
        self.counter += 1
        workdir = self.ctx.tmp / f"ddp-{self.counter}"
        shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("output", "__pycache__"))
        home = self.ctx.tmp / f"ddp-{self.counter}-home"
        (workdir / "tmp").mkdir()
        procs = commands(v, workdir, home, self.torchx.exe, str(free_port()))
        started = time.time()
        result = run_procs(procs, TIMEOUT, on_timeout=lambda r: cancel_submitted(r, procs[0]))
        ok = result.ok and result.find(r"test_accuracy 0\.9") is not None
        m = result.find(STEPS_PER_SEC)
        sample = Sample(result.wall, result.first(FIRST_STEP), float(m.group(1)) if m else None, round_index)
        last = result.first(LAST_LINE)
        sample.exit_tail = result.wall - last if last is not None else None
        if v.tool == "cloudtrain":
            started_at, ended_at = store_times(home, "started_at", "ended_at")
            if started_at is not None and ended_at is not None:
                sample.to_nodes, sample.end_to_exit = started_at - started, started + result.wall - ended_at
        if not ok:
            self.fail(v.name, v.name.replace(" ", "-"), result, home)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        if not ok:
            return None
        if record:
            self.samples.setdefault(v.name, []).append(sample)
        self.ctx.log(f"    {v.name}: {sample.wall:.2f}s, first step {sample.first_step or float('nan'):.2f}s, "
                     f"{sample.steps_per_sec} steps/s")
        return sample

    def order(self, wanted: List[Variant], r: int) -> List[Variant]:
        return round_order(wanted, r)

    def run_rounds(self, wanted: List[Variant], min_rounds: int, max_rounds: int, deadline: float,
                   warmup: bool = False) -> None:
        if warmup:  # page cache for torch / scikit-learn, .pyc files: not counted
            self.ctx.log("  warm-up run (not counted)")
            self.run_one(next(v for v in wanted if v.tool == "torchrun"), record=False)
        super().run_rounds(wanted, min_rounds, max_rounds, deadline)


def _runs(ctx) -> DDPRuns:
    if "ddp" not in ctx.shared:
        ctx.shared["ddp"] = DDPRuns(ctx)
    return ctx.shared["ddp"]


def run_overhead(ctx) -> List[Row]:
    runs = _runs(ctx)
    vs = variants(runs.torchx)
    runs.run_rounds(vs, min_rounds=2 if ctx.quick else 3, max_rounds=2 if ctx.quick else 5,
                    deadline=ctx.deadline - ctx.reserve_after("launch-overhead"), warmup=not ctx.quick)
    rows: List[Row] = []
    for shape in ("1x2", "2x1"):
        ours_v = next(v for v in vs if v.name == f"cloudtrain {shape}")
        ref_v = next(v for v in vs if v.name == f"torchrun {shape}")
        tx_v = Variant(f"torchx {shape}", "torchx", ours_v.nodes, ours_v.procs)
        tx_failure = [] if runs.torchx else [runs.torchx.failure]
        rows.append(runs.compared("launch-overhead", f"digits DDP {shape} (nodes x procs): wall time, cloudtrain vs "
                                  "bare torchrun", ours_v.name, ref_v.name, "wall", display(ours_v),
                                  display(ref_v), f"≤ {WALL_GOAL} × torchrun", lambda r: r <= WALL_GOAL))
        rows.append(runs.compared("launch-overhead", f"digits DDP {shape}: wall time, cloudtrain vs TorchX "
                                  "(local_cwd, c10d rendezvous)", ours_v.name, tx_v.name, "wall", display(ours_v),
                                  display(tx_v), "— (reference)", alt_failures=tx_failure))
        for alt_v, failure in ((ref_v, []), (tx_v, tx_failure)):
            rows.append(runs.compared("launch-overhead", f"digits DDP {shape}: time to first training step "
                                      f"(`epoch 1/` line arrives), cloudtrain vs {alt_v.tool}", ours_v.name,
                                      alt_v.name, "first_step", ["(same commands as above)"],
                                      ["(same commands as above)"], alt_failures=failure))
        tee_v = next((v for v in vs if v.tool == "torchrun-tee" and v.shape == shape), None)
        if tee_v is not None:
            for label, a_v, b_v in (("bare torchrun with the launcher's `--tee 3 --log-dir` vs without: what the "
                                     "per-rank log lines cost inside torchrun", tee_v, ref_v),
                                    ("cloudtrain vs bare torchrun with `--tee 3 --log-dir` (cloudtrain's overhead "
                                     "without torchrun's log tailer)", ours_v, tee_v)):
                rows.append(runs.compared("launch-overhead", f"digits DDP {shape}: wall time, {label}", a_v.name,
                                          b_v.name, "wall", display(a_v), display(b_v)))
        shim_v = next((v for v in vs if v.tool == "shim" and v.shape == shape), None)
        if shim_v is not None and tee_v is not None:
            rows.append(runs.compared("launch-overhead", f"digits DDP {shape}: wall time, torchrun through the "
                                      "launcher's failure shim vs bare torchrun (both with `--tee 3 --log-dir`)",
                                      shim_v.name, tee_v.name, "wall", display(shim_v), display(tee_v)))
            rows.append(runs.compared("launch-overhead", f"digits DDP {shape}: rank 0's last line → the command "
                                      "exits (the ranks' and torchrun's exit), through the shim vs bare torchrun",
                                      shim_v.name, tee_v.name, "exit_tail", ["(same commands as above)"],
                                      ["(same commands as above)"]))
        rows.append(runs.compared("launch-overhead", f"digits DDP {shape}: rank 0's last line → the command exits, "
                                  "cloudtrain vs bare torchrun", ours_v.name, ref_v.name, "exit_tail",
                                  ["(same commands as above)"], ["(same commands as above)"]))
        for attr, what in (("to_nodes", "command start → the supervisor has started every node (store's `started_at`)"),
                           ("end_to_exit", "the job ended (store's `ended_at`) → `cloudtrain submit` exits")):
            st = runs.stats(ours_v.name, attr)
            if st:
                rows.append(Row("launch-overhead", f"digits DDP {shape}: cloudtrain's own latency: {what}",
                                ["(same command as above)"], st, goal="— (reported)", passed=None))
    return rows


def throughput_variants() -> List[Variant]:
    """Longer runs of their own: the 10-epoch job trains for under a second, too short a window
    for a steady steps/s on a shared 2-core machine (one descheduled rank stalls the other)."""
    return [Variant(f"{tool} {n}x{p} ({THROUGHPUT_EPOCHS} epochs)", tool, n, p, THROUGHPUT_EPOCHS)
            for n, p in ((1, 2), (2, 1)) for tool in ("cloudtrain", "torchrun")]


def run_throughput(ctx) -> List[Row]:
    runs = _runs(ctx)
    vs = throughput_variants()
    min_rounds = 2 if ctx.quick else 3
    runs.run_rounds(vs, min_rounds=min_rounds, max_rounds=min_rounds,
                    deadline=ctx.deadline - ctx.reserve_after("throughput"), warmup=False)
    rows = []
    for shape in ("1x2", "2x1"):
        ours_v = next(v for v in vs if v.tool == "cloudtrain" and v.shape == shape)
        ref_v = next(v for v in vs if v.tool == "torchrun" and v.shape == shape)
        rows.append(runs.compared("throughput", f"digits DDP {shape}, {THROUGHPUT_EPOCHS} epochs: `steps_per_sec` "
                                  "printed by train.py (rank 0), under `cloudtrain launch` (via submit -p local) vs "
                                  "bare torchrun", ours_v.name, ref_v.name, "steps_per_sec", display(ours_v),
                                  display(ref_v), f"≥ {THROUGHPUT_GOAL} × torchrun", lambda r: r >= THROUGHPUT_GOAL,
                                  unit="steps/s"))
    return rows
