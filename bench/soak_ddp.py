#!/usr/bin/env python3
"""Run the digits DDP job many times in a row and count the failures: `python bench/soak_ddp.py`.

    python bench/soak_ddp.py [--runs 50] [--nodes 2] [--procs 1] [--hogs 2] [--tool cloudtrain|torchrun]
                             [--epochs N] [--stop-on-failure] [--keep DIR]

`cloudtrain` runs `cloudtrain submit -p local examples/digits-ddp/job.yaml` with the shape set,
each run in a fresh CLOUDTRAIN_HOME; `torchrun` runs bare torchrun the same way (one process per
node, static rendezvous on a free port), for comparison. `--hogs N` keeps N busy-looping
processes beside the runs (a loaded machine makes exit-time races likelier). A failed run's
output and run directory are kept under `--keep` (default: a temporary directory, printed).
Prints one line per run and, at the end, `N passed, N failed`; exits 1 if any run failed.
"""
from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import BIN, EXAMPLE, Proc, base_env, free_port, run_procs  # noqa: E402


def cloudtrain_procs(args, home: Path) -> list:
    env = base_env(CLOUDTRAIN_HOME=str(home))
    argv = [f"{BIN}/cloudtrain", "submit", "-p", "local", "job.yaml",
            "--set", f"distribution.nodes={args.nodes}", "--set", f"distribution.procs_per_node={args.procs}"]
    if args.epochs:
        argv += ["--set", f"command=python train.py --epochs {args.epochs}"]
    return [Proc(argv, str(EXAMPLE), env)]


def torchrun_procs(args, home: Path) -> list:
    port = str(free_port(2))
    env = base_env(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", CLOUDTRAIN_OUTPUT_DIR=str(home / "output"))
    return [Proc([f"{BIN}/torchrun", "--nnodes", str(args.nodes), "--nproc-per-node", str(args.procs),
                  "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", port,
                  "train.py", "--epochs", str(args.epochs or 10)], str(EXAMPLE), env)
            for rank in range(args.nodes)]


def start_hogs(n: int) -> list:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
            for _ in range(n)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--hogs", type=int, default=0, help="busy-looping processes kept beside the runs")
    p.add_argument("--tool", choices=("cloudtrain", "torchrun"), default="cloudtrain")
    p.add_argument("--epochs", type=int, default=0, help="override the job's epochs (0: the job's own)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--stop-on-failure", action="store_true")
    p.add_argument("--keep", type=Path, help="where failed runs' logs go (default: a new temporary directory)")
    args = p.parse_args()

    keep = args.keep or Path(tempfile.mkdtemp(prefix="soak-ddp-"))
    keep.mkdir(parents=True, exist_ok=True)
    make = cloudtrain_procs if args.tool == "cloudtrain" else torchrun_procs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the hogs go too
    hogs = start_hogs(args.hogs)
    passed = failed = 0
    t_start = time.monotonic()
    try:
        for i in range(1, args.runs + 1):
            home = Path(tempfile.mkdtemp(prefix="soak-home-"))
            result = run_procs(make(args, home), timeout=args.timeout)
            ok = result.ok and (args.tool != "cloudtrain" or "SUCCEEDED" in result.tail(3))
            if ok:
                passed += 1
                shutil.rmtree(home, ignore_errors=True)
            else:
                failed += 1
                dest = keep / f"run-{i:03d}"
                shutil.move(str(home), str(dest))
                (dest / "output.txt").write_text("\n".join(f"[{t:8.3f} p{j}] {s}" for t, j, s in result.lines) + "\n")
            print(f"run {i}/{args.runs}: {'ok' if ok else 'FAILED'} codes={result.codes} "
                  f"{result.wall:.1f}s" + ("" if ok else f" (kept in {keep / f'run-{i:03d}'})"), flush=True)
            if not ok and args.stop_on_failure:
                break
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    print(f"{args.tool} {args.nodes}x{args.procs}, {args.hogs} CPU hog(s), "
          f"{time.monotonic() - t_start:.0f}s: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
