"""A failed local job says which node and rank failed first, its own exit code and the last lines
of its error, before anything else; a cancel leaves no traceback; a missing executable is one line.

Real local runs (issue 27, item 7)."""
import json
import re
import time
from pathlib import Path

import pytest

from conftest import run_cli, write_job

pytestmark = pytest.mark.e2e

# rank FAIL_RANK writes its error to stderr and exits 7; the others wait to be stopped
SCRIPT = """
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
print("rank %d working" % rank, flush=True)
if rank == int(os.environ["FAIL_RANK"]):
    time.sleep(0.5)
    print("loading shard 17 of rank %d" % rank, file=sys.stderr, flush=True)
    print("ValueError: shard 17 is empty", file=sys.stderr, flush=True)
    sys.exit(7)
while True:
    time.sleep(0.5)
"""


def job_file(tmp_path, nodes, procs, command="python train.py", fail_rank=1):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(SCRIPT)
    return write_job(tmp_path, f"""
        name: report
        code: {code}
        command: {command}
        distribution: {{type: ddp, nodes: {nodes}, procs_per_node: {procs}}}
        env: {{OMP_NUM_THREADS: "1", FAIL_RANK: "{fail_rank}"}}
    """)


def run_dir_of(home: Path, handle: str) -> Path:
    return home / "runs" / handle.split("://", 1)[1]


def handle_in(stderr: str) -> str:
    return re.search(r"^submitted (\S+)", stderr, re.M).group(1)


def final_line(stderr: str) -> str:
    """submit's last status line (the job's final state and reason)."""
    return [line for line in stderr.splitlines() if " FAILED " in line][-1]


def assert_reported_first(text: str, node: int, rank: int) -> None:
    """The reason starts with the node, the rank and its own exit code, then its error's last lines."""
    reason = text.split(" up  ", 1)[1] if " up  " in text else text
    assert reason.startswith(f"node {node} rank {rank} exited with code 7: "), text
    assert "ValueError: shard 17 is empty" in reason.split("; see ", 1)[0], text


@pytest.mark.parametrize("nodes, procs, node", [(2, 1, 1), (1, 2, 0)], ids=["node-1-of-2", "within-one-node"])
def test_the_first_failing_rank_its_code_and_error_come_first(tmp_path, home, nodes, procs, node):
    proc = run_cli("submit", job_file(tmp_path, nodes, procs), timeout=240)
    assert proc.returncode == 1, proc.stderr
    handle = handle_in(proc.stderr)
    assert_reported_first(final_line(proc.stderr), node, 1)
    shown = run_cli("status", handle, check=0).stdout
    assert_reported_first(shown.splitlines()[0], node, 1)
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    assert_reported_first(status["message"], node, 1)
    waited = run_cli("wait", handle, "-o", "json")
    assert waited.returncode == 1
    assert_reported_first(json.loads(waited.stdout)["message"], node, 1)
    # the node ends with the rank's own exit code, and says so in its log
    log = (run_dir_of(home, handle) / f"node-{node}.log").read_text()
    assert "rank 1 (local rank %d) failed first: exit code 7" % (1 if procs == 2 else 0) in log
    assert "Traceback" not in (run_dir_of(home, handle) / "job.log").read_text()


def test_a_docker_job_gives_the_same_reason(tmp_path, home):
    """The reason comes from the node's own words (the launcher runs in the container), so a
    docker job's is the same as a local one's."""
    import docker
    docker.from_env().images.get(DOCKER_IMAGE)  # scripts/build-test-image.sh makes it
    proc = run_cli("submit", "-p", "docker", job_file(tmp_path, 2, 1), "--set", f"image={DOCKER_IMAGE}", timeout=600)
    assert proc.returncode == 1, proc.stderr
    assert_reported_first(final_line(proc.stderr), 1, 1)
    status = json.loads(run_cli("status", handle_in(proc.stderr), "-o", "json", check=0).stdout)
    assert_reported_first(status["message"], 1, 1)


DOCKER_IMAGE = "cloudtrain/test-python:latest"


def test_cancel_of_a_running_ddp_job_leaves_no_traceback(tmp_path, home):
    handle = run_cli("submit", job_file(tmp_path, 2, 2, fail_rank=-1), "--detach", check=0).stdout.strip()
    job_log = run_dir_of(home, handle) / "job.log"
    deadline = time.monotonic() + 120
    while not (job_log.exists() and job_log.read_text().count("working") == 4):
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.2)
    assert "CANCELLED" in run_cli("cancel", handle, check=0).stdout
    logs = sorted(run_dir_of(home, handle).rglob("*.log"))
    assert len(logs) >= 4
    for log in logs:
        assert "Traceback" not in log.read_text(), f"{log}:\n{log.read_text()}"


def test_a_misspelt_executable_is_one_line_naming_it(tmp_path, home):
    proc = run_cli("submit", job_file(tmp_path, 1, 2, command="pythn train.py"), timeout=120)
    assert proc.returncode == 1, proc.stderr
    handle = handle_in(proc.stderr)
    lines = [line for line in (run_dir_of(home, handle) / "node-0.log").read_text().splitlines() if line.strip()]
    assert len(lines) == 1 and "pythn" in lines[0], lines
    assert "pythn" in final_line(proc.stderr)
    assert "Traceback" not in (run_dir_of(home, handle) / "job.log").read_text()


def test_torchrun_runs_through_the_shim_in_its_own_interpreter(tmp_path):
    """``python -m torch.distributed.run`` keeps its interpreter; a ``torchrun`` console script
    runs in its shebang's; a ``torchrun`` that is no Python script is left as it is."""
    from cloudtrain.launch.failure import SHIM, shim_argv
    assert shim_argv(["/opt/py/bin/python3", "-m", "torch.distributed.run", "--nnodes", "1", "t.py"], {}) == \
        ["/opt/py/bin/python3", "-c", SHIM, "--nnodes", "1", "t.py"]
    script = tmp_path / "torchrun"
    script.write_text("#!/opt/venv/bin/python3.11\nimport sys\n")
    script.chmod(0o755)
    assert shim_argv(["torchrun", "--no-python", "./run.sh"], {"PATH": str(tmp_path)}) == \
        ["/opt/venv/bin/python3.11", "-c", SHIM, "--no-python", "./run.sh"]
    script.write_text("#!/bin/sh\nexec something\n")
    assert shim_argv(["torchrun", "--no-python", "./run.sh"], {"PATH": str(tmp_path)}) is None
