"""kubeflow/eks with ``queue_scheduler: volcano``: the queue and priority go where a
training-operator that gang-schedules with Volcano reads them, ``runPolicy.schedulingPolicy``
(training-operator v1.8.1 pkg/controller.v1/common/job.go: under EnableGangScheduling the PodGroup
gets MinMember from minAvailable, Queue from queue (default "default"), PriorityClassName from
priorityClass); the CRDs (/work/shared/schemas/crds) hold these fields for every kind."""
import pytest

from cloudtrain.spec.errors import EXIT_BAD_INPUT
from conftest import run_cli, write_job
from crd_schemas import crd_validators, validate
from test_manifests import make_job
from cloudtrain_kubernetes import manifests as m

KINDS = {"ddp": ("kubeflow.org/v1", "PyTorchJob"), "mpi": ("kubeflow.org/v2beta1", "MPIJob"),
         "ps-worker": ("kubeflow.org/v1", "TFJob")}


@pytest.mark.parametrize("type_", sorted(KINDS))
def test_volcano_gang_scheduling_gets_the_run_policys_scheduling_policy(type_):
    schema = crd_validators()[KINDS[type_]].schema["properties"]["spec"]["properties"]["runPolicy"]["properties"]
    assert {"queue", "priorityClass", "minAvailable"} <= set(schema["schedulingPolicy"]["properties"])
    job = make_job(type_, nodes=3)
    obj = m.build_kubeflow(job, {"queue": "research", "priority_class": "high", "queue_scheduler": "volcano"})[-1]
    validate(obj)
    policy = obj["spec"]["runPolicy"]["schedulingPolicy"]
    # every pod of the job at once: the MPIJob's launcher counts too
    assert policy == {"queue": "research", "priorityClass": "high", "minAvailable": 4 if type_ == "mpi" else 3}
    assert m.KUEUE_QUEUE not in obj["metadata"].get("labels", {})
    kueue = m.build_kubeflow(job, {"queue": "research", "priority_class": "high"})[-1]
    assert "schedulingPolicy" not in kueue["spec"]["runPolicy"]
    assert kueue["metadata"]["labels"][m.KUEUE_QUEUE] == "research"


def test_volcano_queueing_is_kubeflow_and_eks_only(tmp_path, home):
    path = write_job(tmp_path, """
        name: digits
        command: python train.py
        image: pytorch/pytorch:2.4.0
        providers:
          kubeflow-trainer: {queue: q, queue_scheduler: volcano}
        """)
    assert run_cli("render", "-p", "kubeflow-trainer", path).returncode == EXIT_BAD_INPUT
    ok = run_cli("render", "-p", "kubeflow", path.parent / path.name, "--set", "providers.kubeflow.queue=q",
                 "--set", "providers.kubeflow.queue_scheduler=volcano", "-o", "json", check=0)
    assert ok.returncode == 0 and '"schedulingPolicy"' in ok.stdout


def test_a_trainjob_refuses_volcano_queueing_at_its_line(tmp_path, home):
    path = write_job(tmp_path, """
        name: digits
        command: python train.py
        image: pytorch/pytorch:2.4.0
        providers:
          eks: {cluster: c, region: us-east-1, api: trainer, queue: q, queue_scheduler: volcano}
        """)
    proc = run_cli("render", "-p", "eks", path)
    assert proc.returncode == EXIT_BAD_INPUT and proc.stdout == ""
    assert f"{path}:5: providers.eks.queue_scheduler: " in proc.stderr
    assert "a TrainJob is queued by Kueue only" in proc.stderr
