"""What a Kubeflow or Volcano pod sees, as cloudtrain launch resolves it (stdlib detectors)."""
import json
import subprocess
import sys

import pytest

from cloudtrain_kubernetes.detect import (detect_kubeflow, detect_volcano, kubeflow_environment,
                                          operator_hosts, parse_hostfile, volcano_environment)
from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider
from cloudtrain_kubernetes.trainer_detect import detect_kubeflow_trainer, jobset_hosts


def test_operator_pod_names_follow_the_master_name():
    assert operator_hosts("job-master-0", 3) == ["job-master-0", "job-worker-0", "job-worker-1"]
    assert operator_hosts("job-master-0.ns.svc", 2) == ["job-master-0.ns.svc", "job-worker-0.ns.svc"]
    assert operator_hosts("10.0.0.4", 2) == []


def test_elastic_pytorchjob_takes_the_largest_node_count():
    topo = detect_kubeflow({"MASTER_ADDR": "j-master-0", "MASTER_PORT": "29400", "PET_NNODES": "2:4",
                            "PET_NODE_RANK": "1", "CLOUDTRAIN_KUBEFLOW_KIND": "PyTorchJob"})
    assert (topo.num_nodes, topo.node_rank, topo.hosts[-1]) == (4, 1, "j-worker-2")


def test_mpijob_launcher_reads_the_operator_hostfile(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("mj-worker-0.mj.ns.svc slots=4\nmj-worker-1.mj.ns.svc slots=4\n")
    topo = detect_kubeflow({"OMPI_MCA_orte_default_hostfile": str(hostfile), "CLOUDTRAIN_KUBEFLOW_KIND": "MPIJob",
                            "CLOUDTRAIN_KUBEFLOW_ROLE": "launcher"})
    assert topo.hosts == ["mj-worker-0.mj.ns.svc", "mj-worker-1.mj.ns.svc"]
    assert (topo.node_rank, topo.slots, topo.nproc_per_node, topo.hostfile) == (0, [4, 4], 4, str(hostfile))


def test_hostfile_forms():
    assert parse_hostfile("# c\na slots=2\nb:3\nc\n\n") == (["a", "b", "c"], [2, 3, 1])


def test_mpijob_without_a_host_list_says_what_is_missing():
    with pytest.raises(ValueError, match="neither CLOUDTRAIN_HOSTS nor a readable OMPI_MCA_orte_default_hostfile"):
        detect_kubeflow({"CLOUDTRAIN_KUBEFLOW_KIND": "MPIJob", "OMPI_MCA_orte_default_hostfile": "/nonexistent"})


def test_tfjob_with_a_chief_puts_it_first():
    config = {"cluster": {"worker": ["w0:2222"], "chief": ["c0:2222"], "ps": ["p0:2222"]},
              "task": {"type": "ps", "index": 0}}
    topo = detect_kubeflow({"TF_CONFIG": json.dumps(config)})
    assert (topo.hosts, topo.node_rank, topo.tf_config) == (["c0", "p0", "w0"], 1, config)


def test_other_platforms_are_not_taken_for_kubeflow_or_volcano():
    azure_like = {"MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "6105", "RANK": "1", "WORLD_SIZE": "4", "NODE_RANK": "0"}
    assert detect_kubeflow(azure_like) is None and detect_volcano(azure_like) is None
    assert detect_volcano({"VC_TASK_INDEX": "0"}) is None      # env plugin without svc: nothing to go on
    # another platform's MPI node (its hostfile not readable here) is not claimed, nor an error
    assert detect_kubeflow({"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile-elsewhere"}) is None


def test_volcano_task_order_without_cloudtrain_variables():
    env = {"VC_TASK_INDEX": "0", "VC_WORKER_HOSTS": "v-worker-0.v,v-worker-1.v", "VC_PS_HOSTS": "v-ps-0.v",
           "HOSTNAME": "v-worker-0"}
    topo = detect_volcano(env)
    assert (topo.hosts, topo.node_rank) == (["v-ps-0.v", "v-worker-0.v", "v-worker-1.v"], 1)
    with pytest.raises(ValueError, match="set CLOUDTRAIN_VOLCANO_TASK"):
        detect_volcano(dict(env, HOSTNAME="somewhere-else"))


@pytest.mark.parametrize("dist,ps", [("ddp", 1), ("mpi", 1), ("ps-worker", 2), ("ray", 1)])
def test_environment_and_detect_are_inverse(dist, ps):
    hosts = ["h0", "h1", "h2", "h3"]
    for i in range(4):
        topo = detect_kubeflow(kubeflow_environment(dist, 4, i, hosts, 23456, 2, ps))
        assert (topo.node_rank, topo.num_nodes, topo.hosts) == (i, 4, hosts)
        tasks = [("ps", ps), ("worker", 4 - ps)] if dist == "ps-worker" else [("master", 1), ("worker", 3)]
        topo = detect_volcano(volcano_environment(tasks, i, hosts, 23456))
        assert (topo.node_rank, topo.num_nodes, topo.hosts, topo.master_port) == (i, 4, hosts, 23456)


def test_launch_print_in_a_pytorchjob_pod_gives_torchrun_the_node_rank():
    env = {"MASTER_ADDR": "dj-master-0", "MASTER_PORT": "23456", "RANK": "1", "WORLD_SIZE": "4", "PET_NNODES": "2",
           "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "2", "PET_RDZV_BACKEND": "etcd", "PATH": "/usr/bin:/bin",
           "CLOUDTRAIN_DETECTORS": "kubeflow=cloudtrain_kubernetes.detect:detect_kubeflow"}
    out = subprocess.run([sys.executable, "-m", "cloudtrain", "launch", "--print", "--", "python", "train.py"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for part in ("--nnodes 2", "--node-rank 1", "--nproc-per-node 2", "--master-addr dj-master-0",
                 "--master-port 23456"):
        assert part in out.stdout


# -- Kubeflow Trainer v2 (TrainJob) ----------------------------------------------------------------
def test_trainjob_hosts_follow_the_jobset_pod_names():
    assert jobset_hosts("tj-node-0-0.tj", 3) == ["tj-node-0-0.tj", "tj-node-0-1.tj", "tj-node-0-2.tj"]
    assert jobset_hosts("tj-node-0-0.tj.ns.svc", 2) == ["tj-node-0-0.tj.ns.svc", "tj-node-0-1.tj.ns.svc"]
    assert jobset_hosts("tj-master-0", 2) == [] and jobset_hosts("a-node-0-0.b", 2) == []


def test_trainjob_and_pytorchjob_pods_are_told_apart():
    v1 = {"MASTER_ADDR": "j-master-0", "MASTER_PORT": "23456", "PET_NNODES": "2", "PET_NODE_RANK": "1",
          "PET_MASTER_ADDR": "j-master-0", "PET_MASTER_PORT": "23456"}
    assert detect_kubeflow_trainer(v1) is None and detect_kubeflow(v1).platform == "kubeflow"
    v2 = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "j-node-0-0.j", "PET_MASTER_PORT": "29500",
          "PET_NPROC_PER_NODE": "1"}
    assert detect_kubeflow(v2) is None and detect_kubeflow_trainer(v2).node_rank == 1


def test_trainjob_mpi_launcher_reads_the_trainer_hostfile(tmp_path):
    # kubeflow/trainer mpi.go buildHostFileConfigMap: "<host> slots=<numProcPerNode>", launcher first with
    # runLauncherAsNode, mounted at /etc/mpi/hostfile (OMPI_MCA_orte_default_hostfile)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("ds-launcher-0-0.ds slots=2\nds-node-0-0.ds slots=2\nds-node-0-1.ds slots=2\n")
    topo = detect_kubeflow_trainer({"OMPI_MCA_orte_default_hostfile": str(hostfile),
                                    "OMPI_MCA_orte_set_default_slots": "2",
                                    "CLOUDTRAIN_TRAINER_RUNTIME": "deepspeed-distributed",
                                    "CLOUDTRAIN_TRAINER_MPI": "1"})
    assert (topo.platform, topo.node_rank, topo.num_nodes, topo.slots) == ("kubeflow-trainer", 0, 3, [2, 2, 2])
    assert topo.hosts[0] == "ds-launcher-0-0.ds" and topo.hostfile == str(hostfile)


def test_launch_print_in_a_trainjob_pod_gives_torchrun_the_node_rank_and_port_29500(tmp_path):
    """What the pod runs: the TrainJob's command and env (the Trainer's PET_* added) over the
    launcher bundle its ConfigMap mounts, with no cloudtrain installed."""
    job = job_from_dict({"name": "tj", "command": "python train.py", "image": "i", "code": None,  # the image holds it
                         "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 2}})
    objs = get_provider("kubeflow-trainer").render(job).artifacts
    for key, text in objs[0].content["data"].items():
        path = tmp_path / next(i["path"] for i in objs[1].content["spec"]["runtimePatches"][0]["trainingRuntimeSpec"][
            "template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"][0]["configMap"][
            "items"] if i["key"] == key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    trainer = objs[1].content["spec"]["trainer"]
    env = {e["name"]: e["value"] for e in trainer["env"]}
    env.update({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "2", "PET_MASTER_ADDR": "tj-node-0-0.tj",
                "PET_MASTER_PORT": "29500", "PATH": "/usr/bin:/bin",
                "PYTHONPATH": str(tmp_path)})  # the image's own, after /opt/cloudtrain: the bundle stands in here
    command = [sys.executable if c == "python3" else c for c in trainer["command"]]
    out = subprocess.run([*command[:command.index("--")], "--print", *command[command.index("--"):]],
                         env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for part in ("--nnodes 2", "--node-rank 1", "--nproc-per-node 2", "--master-addr tj-node-0-0.tj",
                 "--master-port 29500"):
        assert part in out.stdout
