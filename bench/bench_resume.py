"""A killed rank to the first step of the restarted job, next to the job's cold start (issue 19).

The digits DDP example on the local provider, 2 nodes x 1 process, with storage.checkpoint and
max_restarts: 1. Per round: `cloudtrain submit --detach`, the time to the first epoch line
(cold start: CLI, supervisor, code copies, torchrun, the process group, one epoch); once epoch 2
is saved, SIGKILL to node 1's training process (a simulated preemption), and the time from the
kill to the first epoch line of the restarted job (the failure noticed, every node stopped and
started again, the checkpoint loaded, one epoch). Both end at the same kind of line, so the
ratio compares like with like. The job is cancelled once measured.

    python bench/bench_resume.py [--rounds 3]      # or: python bench/run.py --only resume
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import EXAMPLE, Row, Stats, base_env, compared  # noqa: E402

EPOCH_LINE = re.compile(r"^\[node0/rank0\] epoch (\d+)/\d+", re.M)
RESTARTED = "restarting every node"
TIMEOUT = 300.0
GOAL = 1.0  # a restart should cost no more than starting the job


def job_file(tmp: Path, index: int) -> Path:
    path = tmp / f"resume-{index}.yaml"
    path.write_text(json.dumps({
        "name": "bench-resume", "code": str(EXAMPLE),
        "command": "python train.py --epochs 40 --sleep-per-epoch 0.5",
        "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 1},
        "env": {"OMP_NUM_THREADS": "1"}, "max_restarts": 1,
        "storage": {"checkpoint": str(tmp / f"ckpt-{index}")}}))
    return path


def wait_until(predicate, timeout: float, poll: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    return None


def training_process(node_pid: int) -> Optional[int]:
    """The training script's process under a node (its launcher became torchrun, whose child it is)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == node_pid and any(a.endswith(b"train.py") for a in argv):
            return int(entry)
    return None


def one_round(tmp: Path, index: int, env: dict) -> dict:
    """{"cold": s, "restart": s, "resumed": s} or {"error": why}."""
    cli = [sys.executable, "-m", "cloudtrain"]
    started = time.monotonic()
    out = subprocess.run([*cli, "submit", "--detach", str(job_file(tmp, index))], env=env,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return {"error": f"submit exited {out.returncode}: {out.stderr.strip()[-300:]}"}
    handle = out.stdout.strip()
    job_id = handle.split("://", 1)[1]
    log = Path(env["CLOUDTRAIN_HOME"]) / "runs" / job_id / "job.log"
    text = lambda: log.read_text(errors="replace") if log.exists() else ""  # noqa: E731
    try:
        if not wait_until(lambda: EPOCH_LINE.search(text()), TIMEOUT):
            return {"error": "no first epoch line: " + text()[-300:]}
        cold = time.monotonic() - started
        if not wait_until(lambda: "epoch 2/" in text(), TIMEOUT):
            return {"error": "no epoch 2"}
        from cloudtrain.runtime.store import Store
        node1 = next(n for n in Store(Path(env["CLOUDTRAIN_HOME"]) / "state.db").get_nodes(job_id) if n["node"] == 1)
        pid = wait_until(lambda: training_process(node1["pid"]), 30)
        if not pid:
            return {"error": "node 1's training process not found"}
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        after = lambda: text().split(RESTARTED, 1)[1] if RESTARTED in text() else ""  # noqa: E731
        if not wait_until(lambda: RESTARTED in text(), TIMEOUT):
            return {"error": "the failure was not noticed: " + text()[-300:]}
        noticed = time.monotonic() - killed
        if not wait_until(lambda: re.search(r"^\[node0/rank0\] rank 0/2", after(), re.M), TIMEOUT):
            return {"error": "the restarted nodes did not join: " + text()[-300:]}
        joined = time.monotonic() - killed
        if not wait_until(lambda: EPOCH_LINE.search(after()), TIMEOUT):
            return {"error": "the restarted job trained no epoch: " + text()[-300:]}
        restart = time.monotonic() - killed
        resumed = re.search(r"resumed from epoch (\d+)", after())
        first = int(EPOCH_LINE.search(after()).group(1))
        if not resumed or first != int(resumed.group(1)) + 1:
            return {"error": f"did not resume: first epoch after the restart {first}, {resumed and resumed.group(0)}"}
        return {"cold": cold, "restart": restart, "noticed": noticed, "joined": joined,
                "resumed_epoch": int(resumed.group(1))}
    finally:
        subprocess.run([*cli, "cancel", handle], env=env, capture_output=True, timeout=120)


def measure(tmp: Path, rounds: int, log=print) -> dict:
    env = base_env(CLOUDTRAIN_HOME=str(tmp / "home"), GLOO_SOCKET_IFNAME="lo")
    out = {"cold": [], "restart": [], "noticed": [], "joined": [], "errors": []}
    for i in range(rounds):
        result = one_round(tmp, i, env)
        log(f"resume round {i + 1}/{rounds}: {result}")
        if "error" in result:
            out["errors"].append(result["error"])
        else:
            for key in ("cold", "restart", "noticed", "joined"):
                out[key].append(result[key])
    return out


COMMAND = ("cloudtrain submit --detach resume.yaml (digits 2x1, storage.checkpoint, max_restarts: 1); "
           "SIGKILL node 1's rank after epoch 2 → first epoch line of the restarted job")
COLD = "cloudtrain submit --detach resume.yaml → first epoch line (cold start)"


def run(ctx) -> List[Row]:
    m = measure(ctx.tmp, 1 if ctx.quick else 3, ctx.log)
    ctx.details.append(f"resume: kill → the supervisor notes the restart {Stats(m['noticed']).median_text()}, "
                       f"→ the restarted ranks joined {Stats(m['joined']).median_text()} (medians).")
    return [compared("resume", "killed rank → first step of the restarted job (local, 2x1)", [COMMAND],
                     Stats(m["restart"]), [COLD], Stats(m["cold"]), f"≤ {GOAL:g} × cold start",
                     lambda r: r <= GOAL, failures=m["errors"], alt_name="cold start", name="restart")]


def main() -> int:
    import tempfile
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ct-bench-resume-") as tmp:
        m = measure(Path(tmp), args.rounds)
    for name, what in (("cold", "cold start: submit -> first epoch line"),
                       ("restart", "restart: kill -> first epoch line of the restarted job"),
                       ("noticed", "  of which: kill -> the supervisor notes the restart"),
                       ("joined", "  of which: kill -> the restarted ranks joined (rank 0/2 line)")):
        s = Stats(m[name])
        print(f"{what}: median {s.median_text()}, {s.range_text()}")
    if m["cold"] and m["restart"]:
        print(f"restart / cold start: {Stats(m['restart']).median / Stats(m['cold']).median:.3f}")
    for e in m["errors"]:
        print("error:", e)
    return 1 if m["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
