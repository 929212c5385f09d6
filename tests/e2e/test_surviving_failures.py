"""Jobs that survive (issue 19), really run locally: a rank killed with SIGKILL mid-run (a
simulated preemption) restarts every node, the example resumes from the checkpoint the last
attempt saved in ``storage.checkpoint`` and still trains to accuracy >= 0.9; ``max_runtime``
ends a job at its limit, FAILED with the reason, with no process left."""
import json
import os
import re
import signal
import time

import pytest

from conftest import EXAMPLES, run_cli, write_job
from helpers import assert_nothing_left, handle_from, run_dir, wait_for

pytestmark = pytest.mark.e2e
PROBE = os.path.join(os.path.dirname(__file__), "probe")


def rank_process(job_id: str, rank: int) -> int:
    """The PID of the training process of global rank ``rank`` of job ``job_id`` (torchrun's
    worker: it has RANK and LOCAL_RANK; torchrun itself has neither)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        if env.get(b"CLOUDTRAIN_JOB_ID") == job_id.encode() and env.get(b"RANK") == str(rank).encode() \
                and b"LOCAL_RANK" in env and b"TORCHELASTIC_RUN_ID" in env:
            return int(entry)
    return 0


def digits_job(tmp_path, checkpoint, extra=""):
    return write_job(tmp_path, f"""
        name: digits-resume
        code: {EXAMPLES / "digits-ddp"}
        command: python train.py --epochs 10 --sleep-per-epoch 1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        env: {{OMP_NUM_THREADS: "1"}}
        storage: {{checkpoint: {checkpoint}}}
        max_restarts: 1
        {extra}
    """)


@pytest.mark.parametrize("emulate", [None, "sagemaker"])
def test_a_killed_rank_restarts_every_node_and_the_job_resumes_from_its_checkpoint(tmp_path, home, emulate):
    checkpoints = tmp_path / "ckpt"
    job = digits_job(tmp_path / "job", checkpoints)
    submitted = run_cli("submit", job, "--detach", *(["--emulate", emulate] if emulate else []), check=0)
    handle = submitted.stdout.strip()
    job_id = handle.split("://", 1)[1]
    log = run_dir(home, handle) / "job.log"
    # three epochs are saved, then rank 1 (node 1's only rank) dies as a reclaimed node would
    wait_for(lambda: log.exists() and "epoch 3/10" in log.read_text(), timeout=300)
    pid = wait_for(lambda: rank_process(job_id, 1), timeout=30)
    os.kill(pid, signal.SIGKILL)
    final = json.loads(run_cli("wait", handle, "-o", "json", timeout=600).stdout)
    text = log.read_text()
    assert final["state"] == "SUCCEEDED", text[-3000:]
    # every node restarted (both nodes' ranks joined again), with the restart count, and the
    # script went on from the last epoch it saved, not from 1
    assert "restarting every node (restart 1 of 1)" in text
    second = text.split("restarting every node", 1)[1]
    assert {m for m in re.findall(r"^\[node(\d)/rank\d\] rank \d/2", second, re.M)} == {"0", "1"}
    resumed = re.search(r"resumed from epoch (\d+) \(restart 1\)", second)
    assert resumed and int(resumed.group(1)) >= 3, second[:3000]
    assert f"epoch {int(resumed.group(1)) + 1}/10" in second and "epoch 1/10" not in second
    assert float(re.search(r"test_accuracy ([0-9.]+)", second).group(1)) >= 0.9
    assert (checkpoints / "digits-ddp.pt").is_file()  # the checkpoint outlives the job
    # status shows the restart and its reason
    assert [r["attempt"] for r in final["restarts"]] == [1]
    assert re.match(r"node [01]( rank \d+)? (exited with code|was killed by signal)", final["restarts"][0]["reason"])
    shown = run_cli("status", handle, check=0).stdout
    assert "restarts 1" in shown and "restart 1 at " in shown
    assert_nothing_left(run_dir(home, handle))


@pytest.mark.serial  # its wall time is bounded (the job ends within 15 s of its 30 s limit)
def test_max_runtime_ends_a_local_job_at_its_limit(tmp_path, home):
    job = write_job(tmp_path, f"""
        name: probe
        code: {PROBE}
        command: python probe.py --sleep 300
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        env: {{OMP_NUM_THREADS: "1"}}
        max_runtime: 30s
        max_restarts: 2
    """)
    started = time.monotonic()
    proc = run_cli("submit", job, timeout=240)
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    handle = handle_from(proc.stderr)
    assert "rank 1 working" in proc.stdout  # it ran, and was stopped while it worked
    assert "FAILED" in proc.stderr and "max_runtime 30s reached" in proc.stderr
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    assert status["state"] == "FAILED" and status["message"] == "max_runtime 30s reached"
    assert status["restarts"] == []  # a time limit is not retried
    assert 29 <= status["ended_at"] - status["started_at"] < 30 + 15 and took < 120
    assert_nothing_left(run_dir(home, handle))


# -- docker: the same semantics with containers --------------------------------------------------
NODE = ("import os, pathlib, sys, time; d = pathlib.Path(os.environ['CLOUDTRAIN_CHECKPOINT_DIR']); "
        "k = int(os.environ['CLOUDTRAIN_RESTART_COUNT']); n = os.environ['CLOUDTRAIN_NODE_RANK']; "
        "print('node', n, 'attempt', k, 'in', d, 'sees', sorted(p.name for p in d.iterdir()), flush=True); "
        "k == 0 and n == '0' and (d / 'saved-by-attempt-0').write_text('x'); "
        "k == 0 and n == '0' and time.sleep(120); "
        "[time.sleep(0.2) for _ in range(300) if k == 0 and n == '1' and not (d / 'saved-by-attempt-0').exists()]; "
        "sys.exit(3 if k == 0 and n == '1' else 0)")


def test_docker_containers_share_the_checkpoint_directory_across_a_restart(tmp_path, home):
    from test_docker_runs import IMAGE, leftovers
    import docker
    client = docker.from_env()
    checkpoints = tmp_path / "ckpt"
    job = write_job(tmp_path / "job", f"""
        name: docker-resume
        code: {PROBE}
        image: {IMAGE}
        command: ["python3", "-c", {json.dumps(NODE)}]
        distribution: {{type: none, nodes: 2}}
        storage: {{checkpoint: {checkpoints}}}
        max_restarts: 1
    """)
    proc = run_cli("submit", "-p", "docker", job, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    handle = handle_from(proc.stderr)
    # every container saw the same directory at /checkpoints; the second attempt found what the
    # first one saved
    assert "node 0 attempt 0 in /checkpoints sees []" in proc.stdout
    assert "node 0 attempt 1 in /checkpoints sees ['saved-by-attempt-0']" in proc.stdout
    assert "node 1 attempt 1 in /checkpoints sees ['saved-by-attempt-0']" in proc.stdout
    assert (checkpoints / "saved-by-attempt-0").is_file()
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    assert [r["attempt"] for r in status["restarts"]] == [1]
    assert status["restarts"][0]["reason"].startswith("node 1 exited with code 3")
    assert leftovers(client, handle) == []


def test_max_runtime_stops_every_container(tmp_path, home):
    from test_docker_runs import IMAGE, leftovers
    import docker
    client = docker.from_env()
    job = write_job(tmp_path, f"""
        name: docker-limit
        code: {PROBE}
        image: {IMAGE}
        command: ["python3", "-c", "import time; print('working', flush=True); time.sleep(600)"]
        distribution: {{type: none, nodes: 2}}
        max_runtime: 25s
    """)
    proc = run_cli("submit", "-p", "docker", job, timeout=300)
    assert proc.returncode == 1, proc.stderr
    handle = handle_from(proc.stderr)
    assert "max_runtime 25s reached" in proc.stderr and "working" in proc.stdout
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    assert status["state"] == "FAILED" and status["message"] == "max_runtime 25s reached"
    assert leftovers(client, handle) == []
