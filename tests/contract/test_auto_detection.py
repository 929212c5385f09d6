"""`cloudtrain launch` without --platform: every built-in platform is recognised from what its
nodes see, in the documented order (docs/launcher.md#detecting-the-platform), most specific
first, the generic platform last.

Nothing here names a detector: the platforms come from the installed plugins' one entry point
each, as on a node where cloudtrain is installed.
"""
import pytest

from cloudtrain.extend import plugins
from cloudtrain.launch import detectors
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.provider import Cluster
from cloudtrain.extend.registry import builtin_providers

# docs/launcher.md's table: tione, azure, sagemaker, modelarts-lite, slurm, modelarts, volcano,
# kubeflow-trainer, kubeflow, then the generic one.
DOCUMENTED_ORDER = ["tione", "azure", "sagemaker", "modelarts-lite", "slurm", "modelarts", "volcano",
                    "kubeflow-trainer", "kubeflow", "local"]
# The providers whose nodes are each platform's (eks's pods are Kubeflow's: named only).
BUILT_IN = {"tione": "tione", "azure": "azure", "sagemaker": "sagemaker", "modelarts-lite": "modelarts-lite",
            "modelarts": "modelarts", "volcano": "volcano", "kubeflow": "kubeflow", "eks": "kubeflow",
            "kubeflow-trainer": "kubeflow-trainer",
            "local": "local", "docker": "docker", "ec2": "ec2", "slurm": "slurm"}


def job(kind: str, nodes: int):
    return job_from_dict({"name": "auto-job", "command": "python train.py", "image": "example/train:1",
                          "distribution": {"type": kind, "nodes": nodes, "procs_per_node": 2},
                          "resources": {"gpus_per_node": 1}})


def clean(env):
    """A node's environment as the platform gives it: no CLOUDTRAIN_DETECTORS from a request."""
    return {k: v for k, v in env.items() if k != "CLOUDTRAIN_DETECTORS"}


def test_every_built_in_provider_is_pinned_here():
    assert sorted(BUILT_IN) == builtin_providers()


def test_auto_detection_follows_the_documented_order():
    names = [name for name, _ in detectors.registered({})]
    assert [n for n in names if n in DOCUMENTED_ORDER] == DOCUMENTED_ORDER
    assert names[-1] == "local"


# modelarts-lite runs ddp, deepspeed and none only (its render refuses the other types).
CASES = [(p, e, kind, nodes) for p, e in sorted(BUILT_IN.items())
         for kind, nodes in [("ddp", 3), ("mpi", 2), ("ps-worker", 3)] if p != "modelarts-lite" or kind == "ddp"]


@pytest.mark.parametrize("provider,expected,kind,nodes", CASES)
def test_every_platform_is_detected_without_naming_it(provider, expected, kind, nodes):
    cls = plugins.get_provider_class(provider)
    cluster = Cluster(hosts=[f"10.0.0.{i + 1}" for i in range(nodes)], master_port=23456)
    for index in range(nodes):
        topo = detectors.detect(clean(cls.environment(job(kind, nodes), index, cluster)))
        assert (topo.platform, topo.node_rank, topo.num_nodes) == (expected if expected != "local" else provider,
                                                                   index, nodes)


def test_a_tione_mpi_node_with_a_readable_hostfile_is_tione_not_kubeflow(tmp_path):
    """TI-ONE's MPI mode mounts an Open MPI hostfile, as Kubeflow's MPIJob does; TI-ONE also
    sets NODE_IP_SLOT_LIST and GPU_NUM (seed 000).  Kubeflow's guess must not win."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.0.0.1 slots=8\n10.0.0.2 slots=8\n")
    environ = {"OMPI_MCA_orte_default_hostfile": str(hostfile), "GPU_NUM": "16", "GPU_NUM_PER_NODE": "8",
               "NODE_IP_SLOT_LIST": "10.0.0.1:8,10.0.0.2:8", "INDEX": "1"}
    topo = detectors.detect(environ)
    assert (topo.platform, topo.node_rank, topo.num_nodes, topo.nproc_per_node) == ("tione", 1, 2, 8)


def test_a_plain_pytorch_environment_counts_nodes():
    """MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK with no PET_* (older Kubeflow operators, many
    schedulers): one launcher per node, so WORLD_SIZE and RANK count nodes."""
    topo = detectors.detect({"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "23456", "WORLD_SIZE": "4", "RANK": "2"})
    assert (topo.platform, topo.node_rank, topo.num_nodes, topo.master_addr, topo.master_port) == \
        ("pytorch", 2, 4, "10.0.0.9", 23456)


def test_a_plain_pytorch_environment_of_a_process_counts_processes():
    """With LOCAL_WORLD_SIZE (set per process by torchrun), WORLD_SIZE and RANK count processes."""
    topo = detectors.detect({"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "23456", "WORLD_SIZE": "8", "RANK": "5",
                             "LOCAL_WORLD_SIZE": "4"})
    assert (topo.node_rank, topo.num_nodes, topo.nproc_per_node) == (1, 2, 4)
