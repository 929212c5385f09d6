"""providers.<p>.queue and priority_class on every Kubernetes provider, validated against the CRDs:
Kueue's labels (kubernetes-sigs/kueue pkg/controller/constants: QueueLabel "kueue.x-k8s.io/queue-name",
WorkloadPriorityClassLabel "kueue.x-k8s.io/priority-class") on kubeflow, kubeflow-trainer and eks;
Volcano's Job spec.queue and spec.priorityClassName (batch.volcano.sh_jobs.yaml) on volcano and
modelarts-lite."""
import pytest

from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.providers.provider import State
from cloudtrain_kubernetes.provider import KubeflowProvider
from conftest import write_job
from crd_schemas import validate

KUEUE = {"kubeflow": {}, "kubeflow-trainer": {}, "eks": {"cluster": "train", "region": "us-east-1"},
         "eks-trainer": {"cluster": "train", "region": "us-east-1", "api": "trainer"}}
VOLCANO = {"volcano": {}, "modelarts-lite": {"accelerator": "gpu"}}


def render(tmp_path, provider, options, dist="ddp"):
    opts = ", ".join(f"{k}: {v}" for k, v in {**options, "queue": "team-q", "priority_class": "urgent"}.items())
    path = write_job(tmp_path, f"""
        name: qjob
        command: python train.py
        image: registry.example/train:1
        distribution: {{type: {dist}, nodes: 3}}
        providers:
          {provider.replace("eks-trainer", "eks")}: {{{opts}}}
        """)
    objs = [a.content for a in get_provider(provider.replace("eks-trainer", "eks")).render(load_job(path)).artifacts]
    for obj in objs:
        validate(obj)
    return objs[-1]


@pytest.mark.parametrize("dist", ["ddp", "mpi", "ps-worker", "deepspeed"])
@pytest.mark.parametrize("provider", sorted(KUEUE))
def test_kueue_labels_on_kubeflow_trainer_and_eks(tmp_path, provider, dist):
    if provider in ("kubeflow-trainer", "eks-trainer") and dist in ("mpi", "ps-worker", "deepspeed"):
        dist = "ddp"  # a named runtime, or one node for deepspeed (test_trainjob.py); the queue is the same label
    obj = render(tmp_path, provider, KUEUE[provider], dist)
    labels = obj["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-q" and labels["kueue.x-k8s.io/priority-class"] == "urgent"
    assert "schedulingPolicy" not in (obj["spec"].get("runPolicy") or {})  # Kueue admits the whole job
    if obj["kind"] == "TrainJob":
        # Kueue resumes it on admission (trainer examples/yaml/03-kueue-integration.yaml)
        assert obj["spec"]["suspend"] is True


@pytest.mark.parametrize("provider", sorted(VOLCANO))
def test_volcano_queue_and_priority_class(tmp_path, provider):
    spec = render(tmp_path, provider, VOLCANO[provider])["spec"]
    assert (spec["queue"], spec["priorityClassName"]) == ("team-q", "urgent")


def test_a_v1_job_kueue_suspends_is_queued():
    obj = {"kind": "PyTorchJob", "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-q"}},
           "status": {"conditions": [{"type": "Created", "status": "True"},
                                     {"type": "Suspended", "status": "True", "reason": "JobSuspended"}]}}
    raw, message = KubeflowProvider().job_state(obj)
    assert (KubeflowProvider.map_state(raw), message) == (State.PENDING, "queued (Kueue LocalQueue team-q)")
