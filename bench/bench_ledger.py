"""`cloudtrain list` over a ledger of 10,000 jobs against the CLI's cold start (goal: ≤ 1.5 ×).

    PYTHONPATH=core:plugins python bench/bench_ledger.py [--rounds N] [--jobs N]

A fresh ``CLOUDTRAIN_HOME`` gets a ledger of ``--jobs`` ended jobs on six providers (a tenth of
them local jobs in the ``jobs`` table, as the supervisors write them; rates on half the cloud
rows), then, in interleaved rounds: ``cloudtrain list`` (the table), ``cloudtrain list -o json``,
and the CLI's cold start as the cli-cold-start benchmark measures it (``cloudtrain render -p
local examples/digits-ddp/job.yaml``), with ``cloudtrain --version`` (the interpreter and
cloudtrain's import alone) for reference.  Medians; the ratio is list over render.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
GOAL = 1.5
PROVIDERS = ("sagemaker", "azure", "tione", "modelarts", "ec2", "eks")
STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


def fill(home: Path, jobs: int) -> None:
    """A store with ``jobs`` ended jobs: nine tenths ledger rows of cloud providers, a tenth local."""
    env_home = os.environ.get("CLOUDTRAIN_HOME")
    os.environ["CLOUDTRAIN_HOME"] = str(home)
    try:
        from cloudtrain.runtime.store import Store
        Store(home / "state.db")  # creates the database
    finally:
        if env_home is None:
            os.environ.pop("CLOUDTRAIN_HOME", None)
        else:
            os.environ["CLOUDTRAIN_HOME"] = env_home
    now = time.time()
    cloud, local = [], []
    for i in range(jobs):
        at = now - (jobs - i) * 60
        if i % 10 == 0:
            local.append((f"bench-{i:06x}", "local", "bench", STATES[i % 3], 2, str(home / "runs" / str(i)), at,
                          at + 5, at + 600))
            continue
        provider = PROVIDERS[i % len(PROVIDERS)]
        job_id = f"region-1/bench-{i:012x}"
        cloud.append((f"{provider}://{job_id}", provider, job_id, "bench", None, "ml.g5.12xlarge", 2, i % 2,
                      3.5 if i % 2 else None, "USD" if i % 2 else None, at, at + 30, at + 3600, STATES[i % 3],
                      i % 3, None, "", None, at + 3600))
    db = sqlite3.connect(home / "state.db")
    with db:
        db.executemany("INSERT INTO ledger (handle, provider, job_id, name, profile, instance_type, nodes, spot, "
                       "rate, currency, submitted_at, started_at, ended_at, state, restarts, emulated, message, "
                       "tried, refreshed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", cloud)
        db.executemany("INSERT INTO jobs (id, provider, name, state, nodes, run_dir, created_at, started_at, ended_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", local)
    db.close()


def timed(argv: List[str], env: Dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=str(REPO), capture_output=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} failed: {proc.stderr.decode(errors='replace').strip()}")
    return elapsed


def measure(rounds: int, jobs: int, log=print) -> Dict[str, List[float]]:
    cli = [sys.executable, "-m", "cloudtrain"]
    subjects = {"list": cli + ["list"], "list -o json": cli + ["list", "-o", "json"],
                "render (cold start)": cli + ["render", "-p", "local", "examples/digits-ddp/job.yaml"],
                "--version": cli + ["--version"]}
    samples: Dict[str, List[float]] = {name: [] for name in subjects}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir(mode=0o700)
        fill(home, jobs)
        env = dict(os.environ, CLOUDTRAIN_HOME=str(home))
        listed = subprocess.run(cli + ["list"], env=env, capture_output=True, text=True, check=True).stdout
        log(f"list prints {len(listed.splitlines()) - 1} jobs")
        for argv in subjects.values():  # warm-up: page cache, .pyc
            timed(argv, env)
        for r in range(rounds):
            names = list(subjects)
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name].append(timed(subjects[name], env))
    return samples


def run(ctx):
    """The suite's entry (bench/run.py): one row, list over the CLI's cold start."""
    from benchlib import Row, Stats
    samples = measure(5 if ctx.quick else 10, 10_000, ctx.log)
    value, alt = Stats(samples["list"]), Stats(samples["render (cold start)"])
    ratio = value.median / alt.median
    return [Row("ledger-list", "`list` over a ledger of 10,000 jobs vs the CLI cold start",
                ["cloudtrain list  # 10,000 jobs"], value,
                ["cloudtrain render -p local examples/digits-ddp/job.yaml"], alt, ratio, f"≤ {GOAL} × cold start",
                ratio <= GOAL, note=f"list -o json: {statistics.median(samples['list -o json']):.3f} s; "
                                    f"--version: {statistics.median(samples['--version']):.3f} s")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=10_000)
    args = parser.parse_args(argv)
    samples = measure(args.rounds, args.jobs)
    for name, values in samples.items():
        print(f"{name:22} median {statistics.median(values):.3f} s  "
              f"({min(values):.3f}-{max(values):.3f}, n={len(values)})")
    ratio = statistics.median(samples["list"]) / statistics.median(samples["render (cold start)"])
    print(f"list / cold start: {ratio:.2f} x (goal <= {GOAL} x): {'PASS' if ratio <= GOAL else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
