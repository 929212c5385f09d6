"""The code reaches a Kubernetes pod with nothing in the image but Python, on every Kubernetes
provider: digits-ddp is submitted (the real ``kubernetes`` client against the loopback API server;
eks finds its cluster with DescribeCluster through moto and signs in with an STS token) and the
pods the operator would make of the stored job are run for real -- a PyTorchJob's Master and
Workers (kubeflow, eks), a Volcano Job's tasks (volcano, modelarts-lite), a TrainJob's node pods
built from the ClusterTrainingRuntime it names as the Trainer controller builds them
(kubeflow-trainer).  The launcher ConfigMap's files and the code ConfigMap's ``binaryData`` are
mounted where the pod spec says, each pod's command runs in an empty working directory with the
env the spec gives (downward API included) plus the variables the operator adds (each pinned to
its upstream source below), and the command unpacks the code and trains from it.

Code too large for a ConfigMap (digits-ddp plus 1.1 MiB of incompressible data) goes through
``code_store``: submitted to kubeflow and to volcano, it is uploaded with the real boto3 to moto
(server mode, 127.0.0.1), the pods' Secret volume holds the presigned URL, and each pod's unpack
step fetches the archive from moto through that URL (no credentials in the pod) and trains."""
import base64
import copy
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, NamedTuple

import pytest
import yaml

from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_aws.eks import EksProvider
from conftest import EXAMPLES
from doubles.kube_double import TOKEN, FakeKube

from doubles.aws_double import CREDENTIALS, REGION, AwsDouble, eks_token_ok, session  # noqa: E402
from doubles.kubelet_double import kubelet_expand

pytestmark = pytest.mark.e2e
BUCKET = "ct-e2e-code"
KUBE_PROVIDERS = ["kubeflow", "kubeflow-trainer", "eks", "volcano", "modelarts-lite"]
RUNTIMES = Path(__file__).resolve().parents[1] / "data" / "runtimes"


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
        items = volume["configMap"].get("items") or [{"key": k, "path": k}
                                                     for k in {**cm.get("data", {}), **cm.get("binaryData", {})}]
        for item in items:
            path = local / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            if item["key"] in cm.get("binaryData", {}):
                path.write_bytes(base64.b64decode(cm["binaryData"][item["key"]]))
            else:
                path.write_text(cm["data"][item["key"]])
        out[vm["mountPath"]] = str(local)
    return out


# Every pod runs on this machine: the names the operators give the pods (and put in the variables
# below) become 127.0.0.1, and the master port a free one (the fixed port would collide).
HOST = "127.0.0.1"


class Pod(NamedTuple):
    spec: dict                 # the pod spec the operator makes
    env: Dict[str, str]        # the variables the operator adds to the container
    fields: Dict[str, str]     # the downward API's values (env valueFrom.fieldRef.fieldPath)


def pytorchjob_pods(obj, port):
    """Master then Workers, with the training operator's variables: kubeflow/training-operator
    v1.9.0 pkg/controller.v1/pytorch/envvar.go setPodEnv (PYTHONUNBUFFERED, WORLD_SIZE = replicas x
    nprocPerNode, RANK = PET_NODE_RANK = the replica's index, Workers from 1; PET_NPROC_PER_NODE from
    spec.nprocPerNode; PET_NNODES) and master.go (MASTER_ADDR/PET_MASTER_ADDR = <job>-master-0,
    MASTER_PORT/PET_MASTER_PORT = the Master's pytorchjob-port)."""
    replicas = obj["spec"]["pytorchReplicaSpecs"]
    specs = [rs["template"]["spec"] for role in ("Master", "Worker") if role in replicas
             for rs in [replicas[role]] for _ in range(rs.get("replicas", 1))]
    nproc = obj["spec"].get("nprocPerNode")
    per_node = int(nproc) if str(nproc).isdigit() else 1  # getNprocPerNodeInt: 1 unless a number
    pods = []
    for rank, spec in enumerate(specs):
        env = {"PYTHONUNBUFFERED": "1", "MASTER_ADDR": HOST, "PET_MASTER_ADDR": HOST, "MASTER_PORT": str(port),
               "PET_MASTER_PORT": str(port), "WORLD_SIZE": str(len(specs) * per_node), "RANK": str(rank),
               "PET_NODE_RANK": str(rank), "PET_NNODES": str(len(specs))}
        if nproc is not None:
            env["PET_NPROC_PER_NODE"] = str(nproc)
        pods.append(Pod(spec, env, {}))
    return pods


def volcano_pods(obj, port):
    """Each task's replicas in task order, with Volcano's variables: volcano-sh/volcano
    pkg/controllers/job/plugins/env/env.go (VK_TASK_INDEX = VC_TASK_INDEX = the pod's index in its
    task), plugins/svc/svc.go (VC_<TASK>_HOSTS = every pod of the task, <job>-<task>-<i>.<job>,
    VC_<TASK>_NUM; the pod's hostname is its name), job_controller_util.go createJobPod (pod
    <job>-<task>-<i>, annotations volcano.sh/job-name, volcano.sh/task-spec and, Volcano >= 1.11,
    volcano.sh/job-retry-count: the Job's status.retryCount, 0 on a first attempt)."""
    name, tasks = obj["metadata"]["name"], obj["spec"]["tasks"]
    hosts = {f"VC_{t['name'].replace('-', '_').upper()}_{k}": v for t in tasks
             for k, v in (("HOSTS", ",".join([HOST] * t["replicas"])), ("NUM", str(t["replicas"])))}
    pods = []
    for task in tasks:
        for i in range(task["replicas"]):
            pod = f"{name}-{task['name']}-{i}"
            fields = {"metadata.name": pod, "status.hostIP": HOST,
                      "metadata.annotations['volcano.sh/job-name']": name,
                      "metadata.annotations['volcano.sh/task-spec']": task["name"],
                      "metadata.annotations['volcano.sh/job-retry-count']": "0"}
            pods.append(Pod(task["template"]["spec"], {**hosts, "VK_TASK_INDEX": str(i), "VC_TASK_INDEX": str(i),
                                                      "HOSTNAME": pod}, fields))
    return pods


def strategic_merge(base, patch):
    """Kubernetes' strategic merge of the fields a runtime patch holds: maps merge, lists of
    objects merge by their patchMergeKey (``name``; ``mountPath`` for volumeMounts), other values
    are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        return {**base, **{k: strategic_merge(base[k], v) if k in base else v for k, v in patch.items()}}
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(x, dict) for x in base + patch):
        key = "mountPath" if any("mountPath" in x for x in base + patch) else "name"
        merged = {x[key]: x for x in base}
        for item in patch:
            merged[item[key]] = strategic_merge(merged[item[key]], item) if item[key] in merged else item
        return list(merged.values())
    return patch


def trainjob_pods(obj, port):
    """The node pods the Trainer controller makes from the ClusterTrainingRuntime the TrainJob
    names (Trainer v2's default runtimes, /work/shared/schemas/runtimes = tests/data/runtimes) and
    the TrainJob: kubeflow/trainer pkg/runtime/core/trainingruntime.go mergeRuntimePatches (a
    strategic merge of spec.runtimePatches into the runtime's JobSet template),
    plugins/jobset/builder.go Trainer (image and command into the `node` container of the job
    labelled trainjob-ancestor-step: trainer, trainer.env upserted), plugins/torch/torch.go
    EnforceMLPolicy (PET_NNODES = numNodes, PET_NPROC_PER_NODE = numProcPerNode, PET_NODE_RANK =
    the Indexed Job's completion index, PET_MASTER_ADDR = <trainjob>-node-0-0.<trainjob>,
    PET_MASTER_PORT = 29500); an Indexed Job's pods get JOB_COMPLETION_INDEX (Kubernetes' Job
    docs, "Completion mode")."""
    runtime = yaml.safe_load((RUNTIMES / "torch_distributed.yaml").read_text())
    trainer = obj["spec"]["trainer"]
    assert obj["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    template = runtime["spec"]["template"]["spec"]
    for patch in obj["spec"].get("runtimePatches") or []:
        template = strategic_merge(template, patch["trainingRuntimeSpec"]["template"]["spec"])
    [node_job] = [rj for rj in template["replicatedJobs"]
                  if rj["template"]["metadata"]["labels"].get("trainer.kubeflow.org/trainjob-ancestor-step")
                  == "trainer"]
    spec = copy.deepcopy(node_job["template"]["spec"]["template"]["spec"])
    [container] = [c for c in spec["containers"] if c["name"] == "node"]
    container.update(image=trainer["image"], command=trainer["command"],
                     env=strategic_merge(container.get("env") or [], trainer.get("env") or []))
    return [Pod(spec, {"PET_NNODES": str(trainer["numNodes"]), "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]),
                       "PET_NODE_RANK": str(i), "JOB_COMPLETION_INDEX": str(i), "PET_MASTER_ADDR": HOST,
                       "PET_MASTER_PORT": str(port)}, {})
            for i in range(trainer["numNodes"])]


# provider -> the plural its job is stored under, and the pods its operator makes of it
OPERATORS = {"kubeflow": ("pytorchjobs", pytorchjob_pods), "eks": ("pytorchjobs", pytorchjob_pods),
             "volcano": ("jobs", volcano_pods), "modelarts-lite": ("jobs", volcano_pods),
             "kubeflow-trainer": ("trainjobs", trainjob_pods)}


def container_env(container, fields):
    """The container's env as the kubelet sets it: values, and downward API references."""
    env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
    env.update({e["name"]: fields[e["valueFrom"]["fieldRef"]["fieldPath"]] for e in container.get("env") or []
                if "fieldRef" in e.get("valueFrom", {})})
    return env


def run_pods(kube, provider, name, tmp_path):
    """Run each pod the operator makes of the stored job ``name`` as the pod would (its mounts,
    env, an empty working directory); the outputs, after asserting every pod exited 0."""
    port = free_port()
    plural, pods_of = OPERATORS[provider]
    pods = pods_of(kube.find(plural, "default", name), port)
    procs = []
    for node, pod in enumerate(pods):
        container = pod.spec["containers"][0]
        root = tmp_path / f"pod-{node}"
        mounts = mount(pod.spec["volumes"], container["volumeMounts"], kube, "default", root)
        workdir = root / "workspace"
        workdir.mkdir()
        env = {**container_env(container, pod.fields), **pod.env}
        env.update({"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": str(root),
                    "CLOUDTRAIN_OUTPUT_DIR": str(root / "output"), "CLOUDTRAIN_MASTER_PORT": str(port)})
        paths = re.compile("|".join(re.escape(p) for p in sorted(mounts, key=len, reverse=True)) + r"(?![-\w])")
        # what the process receives: the kubelet's $(VAR) expansion first (tests/doubles/kubelet_double.py)
        command = [sys.executable if arg == "python3"
                   else paths.sub(lambda hit, mounts=mounts: mounts[hit.group(0)], arg)
                   for arg in (kubelet_expand(a, container_env(container, pod.fields)) for a in container["command"])]
        procs.append(subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), "\n----\n".join(o[-3000:] for o in outs)
    return outs


def submit(provider, kube, tmp_path, request, overrides):
    """digits-ddp submitted to ``provider`` through the real client: a kubeconfig for the loopback
    API server, or (eks) the cluster found with DescribeCluster through moto and an STS token."""
    job_file = overrides.pop("job_file", EXAMPLES / "digits-ddp" / "job.yaml")
    if provider == "eks":
        aws = request.getfixturevalue("moto")
        aws.eks_cluster("train", kube.url)
        job = load_job(job_file, overrides={**overrides, "providers.eks.cluster": "train",
                                            "providers.eks.region": REGION})
        return EksProvider(eks=aws.client("eks"), session=session()).submit(job)
    if provider == "modelarts-lite":
        # ranktable routing fetches Huawei's bootstrap.sh from OBS (and is skipped below 3 nodes anyway)
        overrides["providers.modelarts-lite.routing"] = False
    job = load_job(job_file, overrides={**overrides,
                                        f"providers.{provider}.kubeconfig": kube.kubeconfig(tmp_path / "kc")})
    return get_provider(provider).submit(job)


@pytest.mark.parametrize("provider", KUBE_PROVIDERS)
def test_the_pods_unpack_the_code_from_the_configmap_and_train_digits(tmp_path, home, request, provider):
    with FakeKube(token=eks_token_ok if provider == "eks" else TOKEN) as kube:
        submit(provider, kube, tmp_path, request, {"command": "python train.py --epochs 3"})
        code = kube.find("configmaps", "default", "digits-ddp-code")
        outs = run_pods(kube, provider, "digits-ddp", tmp_path)
    assert set(code["binaryData"]) == {"code.tar.gz"}
    # the code came out of the ConfigMap (no train.py anywhere else in the pod's directory)
    for node in (0, 1):
        work = tmp_path / f"pod-{node}" / "workspace"
        assert (work / "train.py").read_bytes() == (EXAMPLES / "digits-ddp" / "train.py").read_bytes()
    assert all("unpacked" in out for out in outs)
    assert float(re.search(r"test_accuracy ([0-9.]+)", outs[0]).group(1)) >= 0.9
    assert (tmp_path / "pod-0" / "output" / "metrics.json").exists()


@pytest.fixture(scope="module")
def moto():
    with AwsDouble() as aws:
        yield aws


@pytest.mark.parametrize("provider", ["kubeflow", "volcano"])
def test_code_too_large_for_a_configmap_is_fetched_through_the_presigned_url_and_trains(
        tmp_path, home, monkeypatch, request, moto, provider):
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
        submit(provider, kube, tmp_path, request, {
            "job_file": code / "job.yaml", "command": "python train.py --epochs 3",
            f"providers.{provider}.code_store": f"s3://{BUCKET}/e2e",
            f"providers.{provider}.code_store_endpoint": moto.endpoint})
        assert kube.find("configmaps", "default", "digits-ddp-code") is None
        [url] = secret_files(kube, "default", "digits-ddp-code-url").values()
        assert url.decode().startswith(f"{moto.endpoint}/{BUCKET}/e2e/cloudtrain-code/")
        moto.calls.clear()
        outs = run_pods(kube, provider, "digits-ddp", tmp_path)
    assert sum(moto.calls.values()) == 2  # one GET per pod, through the URL: the pods hold no credentials
    for node in (0, 1):  # every pod fetched the whole tree, the data file too
        work = tmp_path / f"pod-{node}" / "workspace"
        assert (work / "train.py").read_bytes() == (EXAMPLES / "digits-ddp" / "train.py").read_bytes()
        assert (work / "data" / "embeddings.bin").read_bytes() == data
    assert all("unpacked" in out for out in outs)
    assert float(re.search(r"test_accuracy ([0-9.]+)", outs[0]).group(1)) >= 0.9
    assert (tmp_path / "pod-0" / "output" / "metrics.json").exists()
