"""eks: a pod that asks for EFA devices asks for 2 MiB huge pages too, as AWS's own EFA example on
EKS does (aws-samples/aws-efa-eks examples/simple/nccl-efa-tests.yaml: ``hugepages-2Mi: 5120Mi``
beside ``vpc.amazonaws.com/efa``; README "HugePages": EFA nodes pre-allocate 5128 2 MiB pages),
and every such pod also requests cpu or memory, which Kubernetes requires ("HugePages require cpu
or memory", kubernetes pkg/apis/core/validation/validation.go ValidateResourceRequirements)."""
import pytest

from cloudtrain.input.loading import job_from_dict
from cloudtrain_aws.eks import EksProvider
from crd_schemas import validate

OPTIONS = {"cluster": "c", "region": "us-east-1"}


def node_resources(resources, rdma="auto", api="kubeflow", **options):
    job = job_from_dict({"name": "efa", "command": "python train.py", "image": "img:1", "code": None,
                         "distribution": {"type": "ddp", "nodes": 2}, "resources": resources,
                         "network": {"rdma": rdma}})
    p = EksProvider()
    objs = p.manifests(job, p.Options(**OPTIONS, api=api, **options))
    for obj in objs:
        validate(obj)
    spec = objs[-1]["spec"]
    if api == "trainer":
        return spec["trainer"]["resourcesPerNode"]
    return spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]


def cpu_or_memory(res):
    return bool({"cpu", "memory"} & (set(res.get("limits", {})) | set(res.get("requests", {}))))


@pytest.mark.parametrize("api", ["kubeflow", "trainer"])
def test_efa_pods_ask_for_huge_pages_and_cpu_or_memory(api):
    res = node_resources({"accelerator": "A100", "gpus_per_node": 8}, api=api)
    assert res["limits"]["vpc.amazonaws.com/efa"] == "4"
    # huge pages cannot be overcommitted: requests equal limits
    assert res["limits"]["hugepages-2Mi"] == res["requests"]["hugepages-2Mi"] == "5120Mi"
    assert cpu_or_memory(res)
    # no memory limit of cloudtrain's own making: the pod is not capped at the example's 8000Mi
    assert "memory" not in res["limits"] and res["requests"]["memory"] == "8000Mi"


def test_the_jobs_own_memory_satisfies_the_rule_and_is_kept():
    res = node_resources({"accelerator": "H100", "gpus_per_node": 8, "memory_gb": 1000})
    assert res["limits"]["hugepages-2Mi"] == "5120Mi"
    assert res["limits"]["memory"] == res["requests"]["memory"] == "1000Gi"


def test_no_efa_no_huge_pages_and_the_option_turns_them_off():
    assert "hugepages-2Mi" not in node_resources({"accelerator": "A100", "gpus_per_node": 8}, rdma="off")["limits"]
    assert "hugepages-2Mi" not in node_resources({"gpus_per_node": 8})["limits"]
    off = node_resources({"accelerator": "A100", "gpus_per_node": 8}, efa_hugepages=None)
    assert "hugepages-2Mi" not in off["limits"] and "memory" not in off["requests"]
    on = node_resources({"accelerator": "A100", "gpus_per_node": 8}, efa_hugepages="10Gi")
    assert on["limits"]["hugepages-2Mi"] == "10Gi"
