"""The job's ``setup:`` on real nodes: run once per node, after the code arrives and before the
launcher; what it makes the script uses; a failing setup fails the node with its reason.

The docker test uses the engine and the locally built test image (scripts/test.sh builds it);
a missing engine fails it (never skips)."""
import json
import re

import pytest

from conftest import run_cli, write_job
from helpers import handle_from, run_dir

pytestmark = pytest.mark.e2e
IMAGE = "cloudtrain/test-python:latest"

# Creates a module the script imports; the quote and the $ reach sh as the user wrote them.
SETUP = """mkdir -p made && printf 'GREETING = "%s"\\n' "it's $CLOUDTRAIN_JOB_NAME_FROM_SETUP" > made/__init__.py"""
SCRIPT = """\
import os
import made
rank = os.environ.get("RANK", "?")
print("uses setup's module:", made.GREETING, "rank", rank, flush=True)
"""


def setup_job(directory, setup, nodes=2, procs=2, count_file=None):
    code = directory / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "train.py").write_text(SCRIPT)
    env = {"CLOUDTRAIN_JOB_NAME_FROM_SETUP": "hello", "OMP_NUM_THREADS": "1"}
    if count_file:
        env["COUNT_FILE"] = str(count_file)
    return write_job(directory, f"""
        name: setup-probe
        code: code
        command: python train.py
        setup: {json.dumps(setup)}
        distribution: {{type: ddp, nodes: {nodes}, procs_per_node: {procs}}}
        env: {json.dumps(env)}
    """)


def test_local_setup_runs_once_per_node_and_the_script_uses_what_it_made(tmp_path, home):
    count = tmp_path / "setup-runs"
    job = setup_job(tmp_path, SETUP + ' && echo ran >> "$COUNT_FILE"', count_file=count)
    proc = run_cli("submit", job, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(re.findall(r"uses setup's module: it's hello rank \d", proc.stdout)) == 4
    assert count.read_text().splitlines() == ["ran", "ran"]  # two nodes, four processes: once per node
    node_log = (run_dir(home, handle_from(proc.stderr)) / "node-1.log").read_text()
    assert "running setup: mkdir -p made" in node_log  # its output is in the node's log


def test_a_failing_setup_fails_the_node_with_its_reason_and_the_command_never_runs(tmp_path, home):
    job = setup_job(tmp_path, 'echo "no matching distribution for nosuchpkg" >&2; exit 3', nodes=1, procs=1)
    proc = run_cli("submit", job, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    handle = handle_from(proc.stderr)
    assert "uses setup's module" not in proc.stdout
    status = json.loads(run_cli("status", handle, "-o", "json", check=0).stdout)
    assert status["state"] == "FAILED"
    assert "setup exited with code 3" in status["message"]
    assert "no matching distribution for nosuchpkg" in status["message"]
    assert "no matching distribution for nosuchpkg" in run_cli("logs", handle, check=0).stdout


def test_docker_setup_runs_in_each_container_before_the_script(tmp_path, home):
    import docker
    docker.from_env().images.get(IMAGE)  # scripts/build-test-image.sh makes it
    job = setup_job(tmp_path, SETUP)
    proc = run_cli("submit", "-p", "docker", job, "--set", f"image={IMAGE}", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(re.findall(r"uses setup's module: it's hello rank \d", proc.stdout)) == 4
    assert len(re.findall(r"running setup: mkdir -p made", proc.stdout + proc.stderr)) == 2
