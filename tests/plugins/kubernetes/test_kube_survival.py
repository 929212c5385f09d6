"""kubeflow, volcano (and eks, modelarts-lite, which build on them): the neutral max_runtime,
storage.checkpoint and spot (issue 19) in the manifests, checked against the upstream CRD
schemas (tests/data/crds) and cited from them."""
from pathlib import Path

import pytest
import yaml

from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_kubernetes import manifests as m
from conftest import write_job
from crd_schemas import validate
from test_manifests import make_job, pods, workload

CRDS = Path(__file__).resolve().parents[2] / "data" / "crds"
SURVIVE = {"max_runtime": "1h30m", "max_restarts": 1, "storage": {"checkpoint": "pvc://team-ckpt/digits/run-1"}}


def crd_spec(name: str) -> dict:
    doc = yaml.safe_load((CRDS / name).read_text())
    return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


@pytest.mark.parametrize("type_", ["ddp", "mpi", "ps-worker"])
def test_kubeflow_jobs_get_an_active_deadline_and_the_checkpoint_claim(type_):
    # kubeflow.org CRDs: runPolicy.activeDeadlineSeconds, "relative to the startTime that the job
    # may be active before the system tries to terminate it"
    assert "activeDeadlineSeconds" in crd_spec("kubeflow.org_pytorchjobs.v1.yaml")["runPolicy"]["properties"]
    job = workload(m.build_kubeflow(make_job(type_, **SURVIVE)))
    validate(job)
    assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 5400 and job["spec"]["runPolicy"]["backoffLimit"] == 1
    for role, (_, spec) in pods(job).items():
        [c] = spec["containers"]
        mounted = [v for v in c["volumeMounts"] if v["name"] == m.CHECKPOINT_VOLUME]
        if role == "Launcher":  # mpirun's pod trains nothing
            assert not mounted
            continue
        assert mounted == [{"name": m.CHECKPOINT_VOLUME, "mountPath": "/cloudtrain/checkpoint",
                            "subPath": "digits/run-1"}]
        assert {"name": "CLOUDTRAIN_CHECKPOINT_DIR", "value": "/cloudtrain/checkpoint"} in c["env"]
        assert {"name": m.CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": "team-ckpt"}} in spec["volumes"]


def test_volcano_has_no_job_deadline_so_each_attempts_pods_get_one():
    # batch.volcano.sh Job CRD: no activeDeadlineSeconds in Job.spec (runningEstimate is a
    # scheduling hint); the pod template's PodSpec has activeDeadlineSeconds
    spec = crd_spec("batch.volcano.sh_jobs.yaml")
    assert "activeDeadlineSeconds" not in spec
    job = workload(m.build_volcano(make_job("ddp", **SURVIVE)))
    validate(job)
    assert "activeDeadlineSeconds" not in job["spec"]
    for _, (_, pod) in pods(job).items():
        assert pod["activeDeadlineSeconds"] == 5400
        assert {"name": m.CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": "team-ckpt"}} in pod["volumes"]
    plain = workload(m.build_volcano(make_job("ddp")))
    assert all("activeDeadlineSeconds" not in pod for _, (_, pod) in pods(plain).items())


def test_a_claim_without_a_sub_path_mounts_the_whole_claim():
    job = workload(m.build_kubeflow(make_job("ddp", storage={"checkpoint": "pvc://ckpt"})))
    [c] = pods(job)["Master"][1]["containers"]
    assert {"name": m.CHECKPOINT_VOLUME, "mountPath": "/cloudtrain/checkpoint"} in c["volumeMounts"]


def test_a_trainjob_gets_its_active_deadline_and_the_checkpoint_claim():
    # trainer.kubeflow.org TrainJob CRD: spec.activeDeadlineSeconds
    from cloudtrain_kubernetes import trainjob as tj
    assert "activeDeadlineSeconds" in crd_spec("trainer.kubeflow.org_trainjobs.v1alpha1.yaml")
    objs = tj.build_trainjob(make_job("ddp", **SURVIVE))
    for obj in objs:
        validate(obj)
    spec = objs[-1]["spec"]
    assert spec["activeDeadlineSeconds"] == 5400
    assert {"name": "CLOUDTRAIN_CHECKPOINT_DIR", "value": "/cloudtrain/checkpoint"} in spec["trainer"]["env"]
    [job] = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]["spec"]
    assert {"name": m.CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": "team-ckpt"}} in pod["volumes"]
    assert {"name": m.CHECKPOINT_VOLUME, "mountPath": "/cloudtrain/checkpoint", "subPath": "digits/run-1"} \
        in pod["containers"][0]["volumeMounts"]


@pytest.mark.parametrize("provider", ["kubeflow", "volcano", "eks", "kubeflow-trainer"])
def test_spot_uses_the_clusters_spot_labels_and_tolerations(provider, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the job's code (.): not the repository, which outgrows a ConfigMap
    spot = {"spot_node_selector": {"karpenter.sh/capacity-type": "spot"},
            "spot_tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            "node_selector": {"gpu": "a100"}, **({"cluster": "c", "region": "us-east-1"} if provider == "eks" else {})}
    job = make_job("ddp", spot=True, providers={provider: spot})
    objs = [a.content for a in get_provider(provider).render(job).artifacts if a.kind == "kubernetes/manifest"]
    workload_obj = objs[-1]
    validate(workload_obj)
    for _, (_, pod) in pod_specs(workload_obj).items():
        assert pod["nodeSelector"] == {"karpenter.sh/capacity-type": "spot", "gpu": "a100"}
        assert pod["tolerations"] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    on_demand = make_job("ddp", providers={provider: spot})
    objs = [a.content for a in get_provider(provider).render(on_demand).artifacts if a.kind == "kubernetes/manifest"]
    assert all(pod["nodeSelector"] == {"gpu": "a100"} and "tolerations" not in pod
               for _, (_, pod) in pod_specs(objs[-1]).items())


def pod_specs(obj):
    """``pods`` of any workload, a TrainJob's from its runtime patch."""
    if obj["kind"] != "TrainJob":
        return pods(obj)
    jobs = obj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return {j["name"]: (1, j["template"]["spec"]["template"]["spec"]) for j in jobs}


@pytest.mark.parametrize("text,message", [
    ("spot: true", "spot: Kubernetes has no spot field: set providers.kubeflow.spot_node_selector"),
    ("storage: {checkpoint: 's3://team/ckpt'}",
     "storage.checkpoint: a Kubernetes cluster keeps checkpoints under pvc://, got 's3://team/ckpt'"),
])
def test_what_a_cluster_cannot_take_is_refused_at_its_line(tmp_path, text, message):
    path = write_job(tmp_path, f"name: k\ncommand: python t.py\nimage: img\n{text}\n")
    with pytest.raises(JobFileError) as info:
        get_provider("kubeflow").render(load_job(path))
    assert str(info.value).startswith(f"{path}:4: {message}"), str(info.value)
