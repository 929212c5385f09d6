"""The code reaches a Kubernetes pod with nothing in the image but Python: digits-ddp is submitted
to kubeflow (the real ``kubernetes`` client against the loopback API server), and the pods the
stored PyTorchJob describes are run for real -- the launcher ConfigMap's files and the code
ConfigMap's ``binaryData`` are mounted where the pod spec says, each pod's command runs in an
empty working directory with the env the spec gives plus the operator's variables, and the
command unpacks the code and trains from it."""
import base64
import os
import re
import socket
import subprocess
import sys

import pytest

from cloudtrain.loading import load_job
from cloudtrain.plugins import get_provider
from cloudtrain.provider import Cluster
from conftest import EXAMPLES
from fake_kube_api import FakeKube

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mount(volumes, mounts, kube, ns, root):
    """Write each ConfigMap volume's keys where the container mounts it (under ``root``);
    returns {mountPath: local directory}."""
    out = {}
    for vm in mounts:
        volume = next(v for v in volumes if v["name"] == vm["name"])
        if "configMap" not in volume:
            continue
        cm = kube.find("configmaps", ns, volume["configMap"]["name"])
        local = root / vm["mountPath"].lstrip("/")
        items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in {**cm.get("data", {}), **cm.get("binaryData", {})}]
        for item in items:
            path = local / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            if item["key"] in cm.get("binaryData", {}):
                path.write_bytes(base64.b64decode(cm["binaryData"][item["key"]]))
            else:
                path.write_text(cm["data"][item["key"]])
        out[vm["mountPath"]] = str(local)
    return out


def test_a_kubeflow_pod_unpacks_the_shipped_code_and_trains_digits(tmp_path, home, monkeypatch):
    with FakeKube() as kube:
        config = kube.kubeconfig(tmp_path / "kubeconfig")
        job = load_job(EXAMPLES / "digits-ddp" / "job.yaml",
                       overrides={"command": "python train.py --epochs 3", "providers.kubeflow.kubeconfig": config})
        get_provider("kubeflow").submit(job)
        stored = kube.find("pytorchjobs", "default", "digits-ddp")
        code = kube.find("configmaps", "default", "digits-ddp-code")
    assert set(code["binaryData"]) == {"code.tar.gz"}
    port = free_port()
    cluster = Cluster(hosts=["127.0.0.1"] * 2, master_port=port)
    procs = []
    for node, role in enumerate(("Master", "Worker")):
        pod = stored["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]
        container = pod["containers"][0]
        root = tmp_path / f"pod-{node}"
        mounts = mount(pod["volumes"], container["volumeMounts"], kube, "default", root)
        workdir = root / "workspace"
        workdir.mkdir()
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        env.update(get_provider("kubeflow").environment(job, node, cluster))
        env.update({"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": str(root),
                    "CLOUDTRAIN_OUTPUT_DIR": str(root / "output"), "CLOUDTRAIN_MASTER_PORT": str(port)})
        paths = re.compile("|".join(re.escape(p) for p in sorted(mounts, key=len, reverse=True)) + r"(?![-\w])")
        command = [sys.executable if arg == "python3" else paths.sub(lambda hit: mounts[hit.group(0)], arg)
                   for arg in container["command"]]
        procs.append(subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n----\n".join(o[-3000:] for o in outs)
    # the code came out of the ConfigMap (no train.py anywhere else in the pod's directory)
    assert (tmp_path / "pod-0" / "workspace" / "train.py").read_bytes() == (EXAMPLES / "digits-ddp" / "train.py").read_bytes()
    assert "unpacked" in outs[0] and float(re.search(r"test_accuracy ([0-9.]+)", outs[0]).group(1)) >= 0.9
    assert (tmp_path / "pod-0" / "output" / "metrics.json").exists()
