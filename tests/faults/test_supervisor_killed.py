"""A job's supervisor killed outright (SIGKILL), for real: the job goes with it within 10 s
(issue 27's bound) with no further cloudtrain command: no process of the job is left (Ray's
raylet and GCS included), a docker job's containers and network are removed, and the store
says FAILED with the reason."""
import json
import os
import signal

import pytest

from conftest import run_cli
from faultlib import job_processes, poll, sleeper_job

pytestmark = pytest.mark.e2e
IMAGE = "cloudtrain/test-python:latest"
BOUND = 10.0  # seconds, from the SIGKILL


def _submit_and_kill(tmp_path, home, *extra, up="up"):
    from cloudtrain.runtime.store import Store
    handle = run_cli("submit", sleeper_job(tmp_path / "job", nodes=2), "--detach", *extra, check=0).stdout.strip()
    job_id = handle.split("://", 1)[1]
    log = home / "runs" / job_id / "job.log"
    poll(lambda: log.exists() and up in log.read_text(), bound=180)
    store = Store(home / "state.db")
    os.kill(store.get_job(job_id)["supervisor_pid"], signal.SIGKILL)
    return store, job_id


def _assert_failed_for_the_kill(store, job_id):
    row = store.get_job(job_id)
    assert row["state"] == "FAILED" and "supervisor" in row["message"] and "killed" in row["message"], row


def test_local_job_goes_with_its_killed_supervisor(tmp_path, home):
    store, job_id = _submit_and_kill(tmp_path, home)
    poll(lambda: not job_processes(home), bound=BOUND)
    poll(lambda: store.get_job(job_id)["state"] == "FAILED", bound=BOUND)
    _assert_failed_for_the_kill(store, job_id)


def test_local_ray_job_goes_with_its_killed_supervisor(tmp_path, home):
    """The head's raylet, GCS server and workers live in process groups of their own."""
    job = tmp_path / "ray"
    job.mkdir()
    (job / "job.yaml").write_text(f"""
name: raysleep
code: {job}
command: python -c "import ray, time; ray.init(); print('ray up', flush=True); time.sleep(600)"
distribution: {{type: ray, nodes: 2}}
env: {{OMP_NUM_THREADS: "1"}}
""")
    from cloudtrain.runtime.store import Store
    handle = run_cli("submit", job / "job.yaml", "--detach", check=0).stdout.strip()
    job_id = handle.split("://", 1)[1]
    log = home / "runs" / job_id / "job.log"
    poll(lambda: log.exists() and "ray up" in log.read_text(), bound=180)
    store = Store(home / "state.db")
    assert any("raylet" in _cmdline(p) for p in job_processes(home))  # there is a Ray to stop
    os.kill(store.get_job(job_id)["supervisor_pid"], signal.SIGKILL)
    poll(lambda: not job_processes(home), bound=BOUND)
    _assert_failed_for_the_kill(store, job_id)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def test_docker_job_goes_with_its_killed_supervisor(tmp_path, home):
    import docker
    client = docker.from_env()
    client.images.get(IMAGE)  # scripts/build-test-image.sh makes it
    store, job_id = _submit_and_kill(tmp_path, home, "-p", "docker", "--set", f"image={IMAGE}")
    flt = {"label": [f"cloudtrain.job={job_id}"]}
    poll(lambda: not client.api.containers(all=True, filters=flt) and not client.api.networks(filters=flt)
         and not job_processes(home), bound=BOUND)
    poll(lambda: store.get_job(job_id)["state"] == "FAILED", bound=BOUND)
    _assert_failed_for_the_kill(store, job_id)
    status = json.loads(run_cli("status", f"docker://{job_id}", "-o", "json", check=0).stdout)
    assert status["state"] == "FAILED"
