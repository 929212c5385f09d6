"""A docker job's containers stop on their own once nothing on the host owns them (issue 39,
item 10): the supervisor and its watchdog killed together (``kill -9`` of both, as an OOM kill of
the group would), the containers end by themselves (each node's entry.sh reads the supervisor's
lease, a FIFO whose only writer was the supervisor: the kernel closes it with the process), and
``list`` then says the job FAILED and why, and removes what is left of it."""
import json
import os
import signal
import time

import pytest

from conftest import run_cli, write_job

pytestmark = pytest.mark.e2e
IMAGE = "cloudtrain/test-python:latest"


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def poll(predicate, timeout=180.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"still not true after {timeout:.0f}s: {predicate.__doc__}"
        time.sleep(0.5)


def test_containers_stop_when_the_supervisor_and_its_watchdog_are_killed(tmp_path, home):
    import docker
    client = docker.from_env()
    client.images.get(IMAGE)  # scripts/build-test-image.sh makes it
    job = write_job(tmp_path / "job", f"""
        name: orphan
        code: {tmp_path / 'job'}
        command: python -c "import time; print('up', flush=True); time.sleep(600)"
        distribution: {{type: none, nodes: 2}}
        """)
    handle = run_cli("submit", "-p", "docker", "--set", f"image={IMAGE}", job, "--detach", check=0).stdout.strip()
    job_id = handle.split("://", 1)[1]
    log = home / "runs" / job_id / "job.log"
    poll(lambda: log.exists() and log.read_text().count("up") >= 2)
    from cloudtrain.runtime.store import Store
    supervisor = Store(home / "state.db").get_job(job_id)["supervisor_pid"]
    [watchdog] = children(supervisor)  # the forked watcher (the nodes are containers, not children)
    flt = {"label": [f"cloudtrain.job={job_id}"]}
    assert len(client.api.containers(filters=flt)) == 2  # running
    for pid in (watchdog, supervisor):  # nothing on the host is left to tidy up
        os.kill(pid, signal.SIGKILL)

    def containers_stopped():
        """the job's containers are no longer running"""
        return client.api.containers(filters=flt) == []  # (running ones only)
    try:
        poll(containers_stopped)
    finally:
        for c in client.api.containers(all=True, filters=flt):
            if c["State"] == "running":
                client.api.remove_container(c["Id"], force=True)
    rows = {r["handle"]: r for r in json.loads(run_cli("list", "-o", "json", check=0).stdout)}
    assert rows[handle]["state"] == "FAILED" and f"supervisor (pid {supervisor}) is gone" in rows[handle]["message"]
    assert client.api.containers(all=True, filters=flt) == [] and client.api.networks(filters=flt) == []
