"""The code reaches a Kubernetes pod with nothing in the image but Python: digits-ddp is submitted
to kubeflow (the real ``kubernetes`` client against the loopback API server), and the pods the
stored PyTorchJob describes are run for real -- the launcher ConfigMap's files and the code
ConfigMap's ``binaryData`` are mounted where the pod spec says, each pod's command runs in an
empty working directory with the env the spec gives plus the operator's variables, and the
command unpacks the code and trains from it.

Code too large for a ConfigMap (digits-ddp plus 1.1 MiB of incompressible data) goes through
``code_store``: submitted to kubeflow and to volcano, it is uploaded with the real boto3 to moto
(server mode, 127.0.0.1), the pods' Secret volume holds the presigned URL, and each pod's unpack
step fetches the archive from moto through that URL (no credentials in the pod) and trains."""
import base64
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cloudtrain.loading import load_job
from cloudtrain.plugins import get_provider
from cloudtrain.provider import Cluster
from conftest import EXAMPLES
from fake_kube_api import FakeKube

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "aws"))
from aws_double import CREDENTIALS, REGION, AwsDouble  # noqa: E402

pytestmark = pytest.mark.e2e
BUCKET = "ct-e2e-code"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def secret_files(kube, ns, name):
    """A Secret volume's files: its keys (``stringData`` as sent, or ``data``'s base64)."""
    secret = kube.find("secrets", ns, name)
    files = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    files.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
    return files


def mount(volumes, mounts, kube, ns, root):
    """Write each ConfigMap and Secret volume's keys where the container mounts it (under
    ``root``); returns {mountPath: local directory}."""
    out = {}
    for vm in mounts:
        volume = next(v for v in volumes if v["name"] == vm["name"])
        if "secret" in volume:
            local = root / vm["mountPath"].lstrip("/")
            local.mkdir(parents=True)
            for key, data in secret_files(kube, ns, volume["secret"]["secretName"]).items():
                (local / key).write_bytes(data)
            out[vm["mountPath"]] = str(local)
            continue
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


def pod_specs(kube, provider, name):
    """The stored job's pod specs in node order: PyTorchJob Master then Worker, Volcano's tasks."""
    if provider == "volcano":
        return [t["template"]["spec"] for t in kube.find("jobs", "default", name)["spec"]["tasks"]]
    replicas = kube.find("pytorchjobs", "default", name)["spec"]["pytorchReplicaSpecs"]
    return [replicas[role]["template"]["spec"] for role in ("Master", "Worker")]


def run_pods(kube, provider, job, specs, tmp_path):
    """Run each pod's container command as the pod would (its mounts, env, empty working
    directory); the outputs, after asserting every pod exited 0."""
    port = free_port()
    cluster = Cluster(hosts=["127.0.0.1"] * len(specs), master_port=port)
    procs = []
    for node, pod in enumerate(specs):
        container = pod["containers"][0]
        root = tmp_path / f"pod-{node}"
        mounts = mount(pod["volumes"], container["volumeMounts"], kube, "default", root)
        workdir = root / "workspace"
        workdir.mkdir()
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        env.update(get_provider(provider).environment(job, node, cluster))
        env.update({"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": str(root),
                    "CLOUDTRAIN_OUTPUT_DIR": str(root / "output"), "CLOUDTRAIN_MASTER_PORT": str(port)})
        paths = re.compile("|".join(re.escape(p) for p in sorted(mounts, key=len, reverse=True)) + r"(?![-\w])")
        command = [sys.executable if arg == "python3" else paths.sub(lambda hit: mounts[hit.group(0)], arg)
                   for arg in container["command"]]
        procs.append(subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), "\n----\n".join(o[-3000:] for o in outs)
    return outs


def test_a_kubeflow_pod_unpacks_the_shipped_code_and_trains_digits(tmp_path, home, monkeypatch):
    with FakeKube() as kube:
        config = kube.kubeconfig(tmp_path / "kubeconfig")
        job = load_job(EXAMPLES / "digits-ddp" / "job.yaml",
                       overrides={"command": "python train.py --epochs 3", "providers.kubeflow.kubeconfig": config})
        get_provider("kubeflow").submit(job)
        code = kube.find("configmaps", "default", "digits-ddp-code")
        outs = run_pods(kube, "kubeflow", job, pod_specs(kube, "kubeflow", "digits-ddp"), tmp_path)
    assert set(code["binaryData"]) == {"code.tar.gz"}
    # the code came out of the ConfigMap (no train.py anywhere else in the pod's directory)
    assert (tmp_path / "pod-0" / "workspace" / "train.py").read_bytes() == (EXAMPLES / "digits-ddp" / "train.py").read_bytes()
    assert "unpacked" in outs[0] and float(re.search(r"test_accuracy ([0-9.]+)", outs[0]).group(1)) >= 0.9
    assert (tmp_path / "pod-0" / "output" / "metrics.json").exists()


@pytest.fixture(scope="module")
def moto():
    with AwsDouble() as aws:
        yield aws


@pytest.mark.parametrize("provider", ["kubeflow", "volcano"])
def test_code_too_large_for_a_configmap_is_fetched_through_the_presigned_url_and_trains(
        tmp_path, home, monkeypatch, moto, provider):
    moto.fresh(monkeypatch, BUCKET)
    for key, value in {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": "/dev/null",
                       "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
        monkeypatch.setenv(key, value)  # boto3's default chain, on this side only: the pods get none
    code = tmp_path / "digits"
    shutil.copytree(EXAMPLES / "digits-ddp", code)
    data = os.urandom(1100 * 1024)  # incompressible: the archive is larger than a ConfigMap holds
    (code / "data").mkdir()
    (code / "data" / "embeddings.bin").write_bytes(data)
    with FakeKube() as kube:
        job = load_job(code / "job.yaml", overrides={
            "command": "python train.py --epochs 3", f"providers.{provider}.kubeconfig": kube.kubeconfig(tmp_path / "kc"),
            f"providers.{provider}.code_store": f"s3://{BUCKET}/e2e", f"providers.{provider}.code_store_endpoint": moto.endpoint})
        get_provider(provider).submit(job)
        assert kube.find("configmaps", "default", "digits-ddp-code") is None
        [url] = secret_files(kube, "default", "digits-ddp-code-url").values()
        assert url.decode().startswith(f"{moto.endpoint}/{BUCKET}/e2e/cloudtrain-code/")
        moto.calls.clear()
        outs = run_pods(kube, provider, job, pod_specs(kube, provider, "digits-ddp"), tmp_path)
    assert sum(moto.calls.values()) == 2  # one GET per pod, through the URL: the pods hold no credentials
    for node in (0, 1):  # every pod fetched the whole tree, the data file too
        work = tmp_path / f"pod-{node}" / "workspace"
        assert (work / "train.py").read_bytes() == (EXAMPLES / "digits-ddp" / "train.py").read_bytes()
        assert (work / "data" / "embeddings.bin").read_bytes() == data
    assert all("unpacked" in out for out in outs)
    assert float(re.search(r"test_accuracy ([0-9.]+)", outs[0]).group(1)) >= 0.9
    assert (tmp_path / "pod-0" / "output" / "metrics.json").exists()
