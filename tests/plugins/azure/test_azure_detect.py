"""azure: the node side.  ``environment()`` (what Azure ML injects, used by --emulate azure) and
``detect()`` (what cloudtrain launch reads in the node) are inverses, the detector stays
standard-library Python 3.8, and it neither misses Azure nor claims other platforms' nodes."""
import ast
import json
import sys
from pathlib import Path

import pytest

from cloudtrain.launch import detectors
from cloudtrain.launch.main import main as launch_main
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.provider import Cluster
from cloudtrain_azure import detect as azure_detect
from cloudtrain_azure.provider import AzureProvider

DETECT_SOURCE = Path(azure_detect.__file__)


def job(kind, nodes, procs=2, **extra):
    dist = {"type": kind, "nodes": nodes, "procs_per_node": procs}
    if kind == "ps-worker":
        dist["ps"] = 1
    return job_from_dict({"name": "detect-me", "command": "python train.py", "distribution": dist, **extra})


@pytest.mark.parametrize("kind,nodes", [(k, n)
                                        for k in ("ddp", "deepspeed", "mpi", "horovod", "ps-worker", "ray", "none")
                                        for n in (1, 3) if (k, n) != ("ps-worker", 1)])  # ps-worker needs a worker
def test_environment_and_detect_are_inverses(kind, nodes):
    spec = job(kind, nodes)
    cluster = Cluster(hosts=[f"10.0.0.{4 + i}" for i in range(nodes)], master_port=24680)
    for index in range(nodes):
        env = AzureProvider.environment(spec, index, cluster)
        topo = azure_detect.detect(env)
        assert (topo.platform, topo.node_rank, topo.num_nodes) == ("azure", index, nodes)
        assert topo.hosts == cluster.hosts and topo.master_addr == "10.0.0.4"
        if kind in ("mpi", "horovod") and nodes == 1:
            assert topo.master_port == 6105  # AZ_BATCHAI_MPI_MASTER_NODE carries no port
        elif kind == "ps-worker":
            assert topo.tf_config["task"] == ({"type": "ps", "index": 0} if index == 0
                                              else {"type": "worker", "index": index - 1})
            assert topo.master_port == 24680 + 2  # the first task's port
        else:
            assert topo.master_port == 24680


def test_the_launcher_runs_torchrun_per_node_from_azures_pytorch_env(tmp_path):
    env = {"AZUREML_RUN_ID": "r1", "MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "6105", "WORLD_SIZE": "2",
           "NODE_RANK": "1", "RANK": "1", "LOCAL_RANK": "0",
           "CLOUDTRAIN_DETECTORS": "azure=cloudtrain_azure.detect:detect", "PATH": "/usr/bin:/bin"}
    import io
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = launch_main(["--print", "--platform", "azure", "--type", "ddp", "--nproc-per-node", "4", "--",
                            "python", "train.py"], environ=env)
    assert code == 0
    line = out.getvalue()
    for part in ("--nnodes 2", "--nproc-per-node 4", "--node-rank 1", "--master-addr 10.0.0.4", "--master-port 6105"):
        assert part in line, line


@pytest.mark.parametrize("env,needle", [
    ({"AZUREML_RUN_ID": "r", "MASTER_ADDR": "h", "MASTER_PORT": "1", "WORLD_SIZE": "8", "NODE_RANK": "1",
      "RANK": "5", "LOCAL_RANK": "1"}, "process_count_per_instance is above 1"),
    ({"AZUREML_RUN_ID": "r", "OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
      "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "AZ_BATCH_MASTER_NODE": "h:6000"},
     "started 4 processes on this node"),
    ({"AZUREML_RUN_ID": "r", "TF_CONFIG": "{not json"}, "TF_CONFIG from Azure ML cannot be read"),
])
def test_a_per_process_launch_is_refused_with_the_fix(env, needle):
    """cloudtrain launch under Azure's per-process launch would start processes*processes."""
    with pytest.raises(ValueError, match=needle):
        azure_detect.detect(env)


@pytest.mark.parametrize("env", [
    {},
    # Kubeflow PyTorchJob and Volcano's pytorch plugin look alike but carry no AZUREML_/AZ_BATCH marker
    {"MASTER_ADDR": "m-0", "MASTER_PORT": "23456", "WORLD_SIZE": "4", "RANK": "1", "PET_NNODES": "2"},
    {"MASTER_ADDR": "m-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "NODE_RANK": "1", "RANK": "1"},
    {"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:2222"]}, "task": {"type": "worker", "index": 0}})},
    {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"},
])
def test_other_platforms_are_not_azure(env):
    assert azure_detect.detect(env) is None


def test_a_job_without_distribution_is_one_node():
    topo = azure_detect.detect({"AZUREML_EXPERIMENT_ID": "e"})
    assert (topo.node_rank, topo.num_nodes, topo.hosts) == (0, 1, ["127.0.0.1"])


def test_auto_detection_picks_azure_before_the_generic_detector():
    env = AzureProvider.environment(job("ddp", 2), 1, Cluster(hosts=["a", "b"], master_port=29400))
    env["CLOUDTRAIN_DETECTORS"] = "azure=cloudtrain_azure.detect:detect"
    topo = detectors.detect(env)
    assert (topo.platform, topo.node_rank, topo.master_addr) == ("azure", 1, "a")


def test_the_detector_is_stdlib_only_python38():
    source = DETECT_SOURCE.read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    stdlib = set(sys.stdlib_module_names)
    assert imported - stdlib <= {"cloudtrain"}, imported - stdlib
    froms = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module.startswith("cloudtrain")}
    assert froms == {"cloudtrain.launch.topology", "cloudtrain.launch.platform"}  # shipped in the launcher bundle


def test_the_shipped_bundle_carries_the_detector(tmp_path):
    from cloudtrain.transfer import shipping
    spec = job_from_dict({"name": "ship", "code": ".", "command": "python t.py"}, path=tmp_path / "job.yaml")
    (tmp_path / "t.py").write_text("print(1)\n")
    staged = shipping.stage(spec, tmp_path / "staged", [AzureProvider.node_platform()])
    assert (staged / ".cloudtrain" / "cloudtrain_azure" / "detect.py").read_text() == DETECT_SOURCE.read_text()
