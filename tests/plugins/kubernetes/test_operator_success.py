"""When a training-operator v1 job is a success, and what its webhooks accept (training-operator
v1.9.0, read with the search tools; CRDs in tests/data/crds)."""
from cloudtrain_kubernetes import manifests as m
from cloudtrain_kubernetes.detect import detect_kubeflow, kubeflow_environment
from crd_schemas import validate

from test_manifests import make_job


def kubeflow_obj(job):
    return m.build_kubeflow(job, {"provider": "kubeflow"})[-1]


def env_of(replica_spec):
    return replica_spec["template"]["spec"]["containers"][0]["env"]


def test_none_is_workers_only_so_the_job_succeeds_when_every_node_has():
    """pkg/controller.v1/pytorch/pytorchjob_controller.go UpdateJobStatus: with a Master "when
    master is succeed, the job is finished" and cleanPodPolicy Running deletes the other pods
    (common/job.go); without one the job succeeds when every Worker has (expected == 0)."""
    obj = kubeflow_obj(make_job("none", nodes=3))
    validate(obj)
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert list(specs) == ["Worker"] and specs["Worker"]["replicas"] == 3
    env = env_of(specs["Worker"])
    index = next(e for e in env if e["name"] == "CLOUDTRAIN_REPLICA_INDEX")
    # pkg/apis/kubeflow.org/v1/common_types.go ReplicaIndexLabel, through the downward API
    assert index["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['training.kubeflow.org/replica-index']"
    hosts = next(e["value"] for e in env if e["name"] == "CLOUDTRAIN_HOSTS")
    name = obj["metadata"]["name"]
    assert hosts == f"{name}-worker-0,{name}-worker-1,{name}-worker-2"
    # the operator sets no MASTER_ADDR/RANK without a Master (pytorch/envvar.go setPodEnv), only
    # PET_NNODES and PET_NPROC_PER_NODE: the node rank is the replica index
    pod = {e["name"]: e["value"] for e in env if "value" in e}
    pod.update({"PET_NNODES": "3", "PET_NPROC_PER_NODE": "1", "CLOUDTRAIN_REPLICA_INDEX": "2"})
    topo = detect_kubeflow(pod)
    assert (topo.node_rank, topo.num_nodes, topo.master_addr) == (2, 3, f"{name}-worker-0")
    # the emulation gives the same shape
    emulated = detect_kubeflow(kubeflow_environment("none", 3, 1, ["a", "b", "c"], 29500, 1))
    assert (emulated.node_rank, emulated.hosts) == (1, ["a", "b", "c"]) and "MASTER_ADDR" not in \
        kubeflow_environment("none", 3, 1, ["a", "b", "c"], 29500, 1)


def test_ps_worker_tfjobs_wait_for_every_worker():
    """pkg/controller.v1/tensorflow/tfjob_controller.go UpdateJobStatus: succeeded when
    `expected == 0 || (worker0Completed && successPolicy != AllWorkers)`."""
    obj = kubeflow_obj(make_job("ps-worker", nodes=3))
    validate(obj)
    assert obj["spec"]["successPolicy"] == "AllWorkers"


def test_one_node_elastic_ddp_has_the_worker_the_webhook_requires():
    """pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchSpec: an elasticPolicy needs a
    Worker replica ("must be configured if elastic policy is used"); validatePyTorchReplicaSpecs:
    Master replicas must be 1, Worker replicas at least 1."""
    obj = kubeflow_obj(make_job("ddp", nodes=1, max_restarts=3))
    validate(obj)
    spec = obj["spec"]
    assert "elasticPolicy" in spec
    assert "Worker" in spec["pytorchReplicaSpecs"] and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] >= 1
    assert spec["pytorchReplicaSpecs"].get("Master", {"replicas": 1})["replicas"] == 1
    name = obj["metadata"]["name"]
    assert spec["elasticPolicy"]["rdzvHost"] == f"{name}-worker-0"  # the one pod there is
    # several nodes keep Master + Workers, the rendezvous on the master
    multi = kubeflow_obj(make_job("ddp", nodes=3, max_restarts=3))["spec"]
    assert multi["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert multi["elasticPolicy"]["rdzvHost"].endswith("-master-0")
