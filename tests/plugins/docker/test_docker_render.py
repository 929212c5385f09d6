"""The docker provider's render: Engine API bodies for the network and every node's container."""

import pytest

from cloudtrain.spec.errors import BadInput
from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider


def render(**overrides):
    data = {"name": "dj", "command": "python train.py", "image": "img:1",
            "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 2},
            "env": {"OMP_NUM_THREADS": "1"}, "secrets": {"TOKEN": {"from_env": "CT_DOCKER_SECRET"}}}
    data.update(overrides)
    rendered = get_provider("docker").render(job_from_dict(data))
    return rendered, {a.kind + ":" + a.name: a.content for a in rendered.artifacts}


def env_of(body):
    return dict(item.split("=", 1) for item in body["Env"])


def test_network_and_containers(monkeypatch):
    monkeypatch.setenv("CT_DOCKER_SECRET", "never-shown-4711")
    rendered, by = render()
    net = by["docker/network:ct-<run-id>"]
    assert net["Internal"] is True and net["Driver"] == "bridge"
    c1 = by["docker/container:ct-<run-id>-1"]
    assert c1["Hostname"] == "dj-1" and c1["Image"] == "img:1"
    assert c1["NetworkingConfig"]["EndpointsConfig"]["ct-<run-id>"]["Aliases"] == ["dj-1"]
    assert c1["HostConfig"]["NetworkMode"] == "ct-<run-id>" and c1["HostConfig"]["Init"] is True
    assert c1["Entrypoint"] == ["/bin/sh", "/opt/cloudtrain/entry.sh"]
    assert c1["Cmd"][:3] == ["python3", "-m", "cloudtrain.launch"]
    env = env_of(c1)
    assert env["CLOUDTRAIN_NODE_RANK"] == "1" and env["CLOUDTRAIN_MASTER_ADDR"] == "dj-0"
    assert env["CLOUDTRAIN_HOSTS"] == "dj-0,dj-1" and env["PYTHONPATH"] == "/opt/cloudtrain"
    # secrets: a read-only file, never the environment or labels that docker inspect shows
    assert "TOKEN" not in env and env["CLOUDTRAIN_SECRETS_FILE"] == "/run/cloudtrain/secrets.json"
    assert any(b.endswith("secrets.json:/run/cloudtrain/secrets.json:ro") for b in c1["HostConfig"]["Binds"])
    assert by["docker/secrets-file:/run/cloudtrain/secrets.json"] == {"TOKEN": "***"}
    assert "never-shown-4711" not in rendered.to_json()
    assert set(c1["Labels"]) == {"cloudtrain.provider", "cloudtrain.job", "cloudtrain.name", "cloudtrain.node"}


def test_resources_map_to_host_config():
    _, by = render(resources={"gpus_per_node": 2, "cpus_per_node": 1.5, "memory_gb": 4, "shm_gb": 2})
    hc = by["docker/container:ct-<run-id>-0"]["HostConfig"]
    assert hc["NanoCpus"] == 1_500_000_000 and hc["Memory"] == 4 * 1024 ** 3 and hc["ShmSize"] == 2 * 1024 ** 3
    assert hc["DeviceRequests"] == [{"Driver": "nvidia", "Count": 2, "Capabilities": [["gpu"]]}]
    _, by = render()
    assert by["docker/container:ct-<run-id>-0"]["HostConfig"]["ShmSize"] == 1024 ** 3
    assert "DeviceRequests" not in by["docker/container:ct-<run-id>-0"]["HostConfig"]


def test_mpi_gets_ssh_between_nodes():
    _, by = render(distribution={"type": "mpi", "nodes": 2, "procs_per_node": 1})
    body = by["docker/container:ct-<run-id>-0"]
    assert any(b.endswith("/ssh:/run/cloudtrain/ssh:ro") for b in body["HostConfig"]["Binds"])
    assert "StrictHostKeyChecking=no" in env_of(body)["OMPI_MCA_plm_rsh_args"]
    # node 0 waits for every node's sshd before mpirun: sshd forks into the background before it
    # binds port 22 (OpenSSH sshd.c: daemon() is called before server_listen())
    assert env_of(body)["CLOUDTRAIN_WAIT_SSH"] == "22"
    _, by = render()
    assert "OMPI_MCA_plm_rsh_args" not in env_of(by["docker/container:ct-<run-id>-0"])
    assert "CLOUDTRAIN_WAIT_SSH" not in env_of(by["docker/container:ct-<run-id>-0"])


def test_emulation_injects_the_platforms_environment():
    _, by = render(providers={"docker": {"emulate": "fakeone"}})
    env = env_of(by["docker/container:ct-<run-id>-1"])
    assert env["NODE_LIST"] == "dj-0:0,dj-1:0" and env["RANK"] == "1" and env["WORLD_SIZE"] == "2"
    assert env["CLOUDTRAIN_DETECTORS"] == "fakeone=ct_fakeone.detect:detect"


def test_an_image_is_required():
    with pytest.raises(BadInput, match="needs an image"):
        render(image=None)
    _, by = render(image=None, providers={"docker": {"image": "other:2"}})
    assert by["docker/container:ct-<run-id>-0"]["Image"] == "other:2"


def test_render_imports_no_docker_sdk():
    import subprocess
    import sys
    from conftest import cli_env
    code = ("import sys; from cloudtrain.input.loading import job_from_dict; "
            "from cloudtrain.extend.plugins import get_provider; "
            "get_provider('docker').render(job_from_dict({'name': 'x', 'command': 'c', 'image': 'i'})); "
            "print('docker' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
    assert proc.stdout.strip() == "False"
