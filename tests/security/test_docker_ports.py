"""The docker provider publishes no port: during a real two-node run, no container of the job
binds a host port, publishes all ports or shares the host's network (issue 26, item 5)."""
import time

import pytest

from conftest import run_cli, write_job

pytestmark = pytest.mark.e2e
IMAGE = "cloudtrain/test-python:latest"


@pytest.mark.timeout(900)
def test_no_container_of_a_docker_job_publishes_a_port(home, tmp_path):
    import docker
    engine = docker.from_env()
    engine.images.get(IMAGE)  # scripts/build-test-image.sh makes it
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(
        "import time, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "dist.barrier()\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n")
    job = write_job(tmp_path, f"""
        name: ports
        code: code
        command: python job.py
        image: {IMAGE}
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        env: {{OMP_NUM_THREADS: "1"}}
        """)
    handle = run_cli("submit", "-p", "docker", job, "--detach", check=0).stdout.strip().splitlines()[-1]
    job_id = handle.split("://", 1)[1]
    flt = {"label": [f"cloudtrain.job={job_id}"]}
    try:
        deadline = time.monotonic() + 600
        while True:  # bounded poll: both containers up and their ranks past the rendezvous
            running = engine.api.containers(filters=flt)
            logs = b"".join(engine.api.logs(c["Id"]) for c in running)
            if len(running) == 2 and logs.count(b"ready") >= 2:
                break
            assert time.monotonic() < deadline, f"the job's containers did not get ready: {logs[-2000:]!r}"
            time.sleep(0.5)
        for container in running:
            inspected = engine.api.inspect_container(container["Id"])
            host = inspected["HostConfig"]
            assert not host.get("PortBindings"), host.get("PortBindings")
            assert not host.get("PublishAllPorts")
            network_mode = host.get("NetworkMode")
            assert network_mode not in ("host",) and not str(network_mode).startswith("container:")
            published = {port: bound for port, bound in (inspected["NetworkSettings"].get("Ports") or {}).items()
                         if bound}
            assert not published, published
            assert list(inspected["NetworkSettings"]["Networks"]) == [f"ct-{job_id}"]
    finally:
        run_cli("cancel", handle)
