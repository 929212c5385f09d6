"""kubeflow-trainer on an MPI runtime (``deepspeed-distributed``) with more than one node: the
runtime runs the TrainJob's command on its launcher pod only, the ``node`` pods run sshd
(tests/data/runtimes/deepspeed_distributed.yaml: the launcher job alone carries
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``; kubeflow/trainer
pkg/runtime/framework/plugins/jobset/builder.go gives spec.trainer's image and command to that job
only).  The MPI plugin mounts the hostfile at ``/etc/mpi/hostfile`` and names it in
``OMPI_MCA_orte_default_hostfile``, the launcher first with ``runLauncherAsNode``, one
``<host> slots=<numProcPerNode>`` line per pod (kubeflow/trainer pkg/constants/constants.go
MPIHostfileDir, OpenMPIEnvHostFileLocation; plugins/mpi/mpi.go buildHostFileConfigMap).  So
cloudtrain's launcher pod starts the node command on every host with mpirun, as an MPIJob's
launcher starts ranks; here it is rendered, checked against the CRD and the runtime, then run
for real: the launcher pod's command and env, the hostfile the plugin would mount (every host
this machine), real mpirun, real DeepSpeed training on two nodes."""
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cloudtrain.input.loading import job_from_dict
from cloudtrain_kubernetes import trainjob as tj
from cloudtrain_kubernetes import trainer_detect as td
from conftest import EXAMPLES
from crd_schemas import validate
from doubles.kube_double import FakeKube

ROOT = Path(__file__).resolve().parents[3]
RUNTIMES = ROOT / "tests" / "data" / "runtimes"
TRAINER_OPTIONS = {"provider": tj.PLATFORM, "platform": tj.PLATFORM,
                   "detector_targets": ("cloudtrain_kubernetes.detect:detect_kubeflow", tj.DETECTOR)}


def deepspeed_job(nodes=2, **extra):
    data = {"name": "dsdigits", "command": "python train.py --epochs 2",
            "image": "ghcr.io/kubeflow/trainer/deepspeed-runtime",
            "code": None, "distribution": {"type": "deepspeed", "nodes": nodes, "procs_per_node": 1},
            "env": {"OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"}}
    data.update(extra)
    return job_from_dict(data)


def trainjob(job, **options):
    return tj.build_trainjob(job, {**TRAINER_OPTIONS, **options}, tj.runtime_for(job))[-1]


def test_the_default_runtime_runs_the_command_on_its_launcher_only_and_the_hostfile_lists_it_first():
    runtime = yaml.safe_load((RUNTIMES / "deepspeed_distributed.yaml").read_text())
    mpi = runtime["spec"]["mlPolicy"]["mpi"]
    assert mpi["runLauncherAsNode"] is True and mpi["mpiImplementation"] == "OpenMPI"
    jobs = {rj["name"]: rj for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]}
    ancestors = {name for name, rj in jobs.items()
                 if (rj["template"].get("metadata") or {}).get("labels", {}).get(
                     "trainer.kubeflow.org/trainjob-ancestor-step") == "trainer"}
    assert ancestors == {"launcher"}
    node = jobs["node"]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert node["command"] == ["/usr/sbin/sshd"]  # the node pods run sshd, not the trainer's command


def test_multi_node_deepspeed_renders_a_launcher_that_drives_every_node():
    obj = trainjob(deepspeed_job(nodes=3))
    validate(obj)
    spec = obj["spec"]
    assert spec["runtimeRef"]["name"] == "deepspeed-distributed" and spec["trainer"]["numNodes"] == 3
    command = spec["trainer"]["command"]
    fanout = command[command.index("cloudtrain-node") + 1:]
    assert fanout[:6] == ["python3", "-m", "cloudtrain_kubernetes.trainer_detect", "--python", "python3", "--"]
    node = fanout[6:]
    launch = node[node.index("cloudtrain-node") + 1:]
    assert launch[:5] == ["python3", "-m", "cloudtrain.launch", "--platform", "kubeflow-trainer"]
    assert launch[launch.index("--type") + 1] == "deepspeed"
    # both replicated jobs get the launcher bundle: the node pods run the node command over ssh
    (patch,) = spec["runtimePatches"]
    names = [rj["name"] for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]]
    assert sorted(names) == ["launcher", "node"]
    # one node, and the torch runtime, need no fan-out
    single = trainjob(deepspeed_job(nodes=1))["spec"]["trainer"]["command"]
    assert "cloudtrain_kubernetes.trainer_detect" not in single
    ddp = tj.build_trainjob(deepspeed_job(distribution={"type": "ddp", "nodes": 3}), TRAINER_OPTIONS)[-1]
    assert "cloudtrain_kubernetes.trainer_detect" not in ddp["spec"]["trainer"]["command"]


def test_mpi_types_on_an_mpi_runtime_keep_their_own_mpirun():
    job = deepspeed_job(distribution={"type": "mpi", "nodes": 3})
    obj = tj.build_trainjob(job, TRAINER_OPTIONS, tj.runtime_for(job, "mpi-openmpi"))[-1]
    assert "cloudtrain_kubernetes.trainer_detect" not in obj["spec"]["trainer"]["command"]


def test_the_fanout_runs_one_node_command_per_host_and_forwards_the_nodes_variables(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("j-launcher-0-0.j slots=8\nj-node-0-0.j slots=8\nj-node-0-1.j slots=8\n")
    environ = {"OMPI_MCA_orte_default_hostfile": str(hostfile), "OMPI_MCA_orte_set_default_slots": "8",
               "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10", "CLOUDTRAIN_JOB_ID": "j",
               "CLOUDTRAIN_ENV_NAMES": "HF_TOKEN,MY_FLAG", "HF_TOKEN": "secret-5150", "MY_FLAG": "1",
               "CLOUDTRAIN_NODE_RANK": "0", "PATH": "/usr/bin"}
    argv, env = td.fanout_argv(["node-cmd", "arg"], environ, is_root=False)
    assert argv[:9] == ["mpirun", "-np", "3", "-H", "j-launcher-0-0.j:1,j-node-0-0.j:1,j-node-0-1.j:1",
                        "--map-by", "slot", "--bind-to", "none"]
    assert argv[-7:] == ["python3", "-m", "cloudtrain_kubernetes.trainer_detect", "--node", "--", "node-cmd", "arg"]
    forwarded = {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}
    assert {"CLOUDTRAIN_JOB_ID", "CLOUDTRAIN_HOSTS", "HF_TOKEN", "MY_FLAG", "PATH"} <= forwarded
    assert "CLOUDTRAIN_NODE_RANK" not in forwarded and "secret-5150" not in argv
    # the plugin's hostfile (slots=8) would stack copies on one host: mpirun gets -H only
    assert not any(k.startswith("OMPI_MCA_orte_") for k in env)
    assert env["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10"
    assert env["CLOUDTRAIN_HOSTS"] == "j-launcher-0-0.j,j-node-0-0.j,j-node-0-1.j"
    # each node learns its place from mpirun's rank, and none of mpirun's variables reach it
    # (DeepSpeed refuses OMPI_COMM_WORLD_LOCAL_RANK != LOCAL_RANK: deepspeed/runtime/engine.py)
    under_mpirun = {**env, tj.RUNTIME_ENV: "deepspeed-distributed", tj.MPI_ENV: "1", "CLOUDTRAIN_MASTER_PORT": "29500",
                    "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "PMIX_RANK": "2"}
    node_env = td.node_environment(under_mpirun)
    assert not any(k.startswith(("OMPI_", "PMIX_")) for k in node_env)
    node = td.detect_kubeflow_trainer(node_env)
    assert (node.node_rank, node.num_nodes, node.master_addr) == (2, 3, "j-launcher-0-0.j")


def pod_env(obj, hostfile, hostname):
    """A launcher pod's env: the TrainJob's literal trainer.env, the MPI plugin's hostfile variable
    (kubeflow/trainer constants OpenMPIEnvHostFileLocation) and the hostname JobSet gives it."""
    env = {e["name"]: e["value"] for e in obj["spec"]["trainer"]["env"] if "value" in e}
    return {**env, "OMPI_MCA_orte_default_hostfile": str(hostfile), "HOSTNAME": hostname}


@pytest.mark.parametrize("nodes", [1, 3])
def test_the_node_count_is_the_jobs_not_the_hostfiles_and_the_launcher_is_node_0(tmp_path, nodes):
    """kubeflow/trainer pkg/runtime/framework/plugins/mpi/mpi.go EnforceMLPolicy: with
    runLauncherAsNode the node job gets max(numNodes-1, 1) pods, and buildHostFileConfigMap/isNode
    write the launcher and every node pod, in the runtime's replicated-job order (node first in
    deepspeed-distributed).  A one-node job's hostfile names two pods; the job has one node."""
    obj = trainjob(deepspeed_job(nodes=nodes))
    name = obj["metadata"]["name"]
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(FakeKube.trainjob_hostfile(obj))
    assert len(hostfile.read_text().splitlines()) == max(nodes, 2)
    topo = td.detect_kubeflow_trainer(pod_env(obj, hostfile, f"{name}-launcher-0-0"))
    assert topo.num_nodes == nodes and len(topo.hosts) == nodes
    assert topo.node_rank == 0 and topo.hosts[0] == topo.master_addr == f"{name}-launcher-0-0.{name}"
    if nodes > 1:  # the fan-out starts one node command per job node, the launcher as rank 0
        argv, env = td.fanout_argv(["node-cmd"], pod_env(obj, hostfile, f"{name}-launcher-0-0"), is_root=False)
        assert argv[argv.index("-np") + 1] == str(nodes)
        assert env["CLOUDTRAIN_HOSTS"].split(",")[0] == f"{name}-launcher-0-0.{name}"


def test_emulating_a_one_node_deepspeed_trainjob_gives_the_runtimes_hostfile_and_one_node():
    class Cluster:
        hosts, master_port = ("127.0.0.1",), 29500
    env = td.emulate(deepspeed_job(nodes=1), 0, Cluster())
    assert env["CLOUDTRAIN_HOSTS"] == "127.0.0.1,127.0.0.1"  # launcher + the sshd node pod (mpi.go isNode)
    topo = td.detect_kubeflow_trainer(env)
    assert (topo.num_nodes, topo.hosts) == (1, ["127.0.0.1"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.e2e
def test_two_node_deepspeed_trains_for_real_through_the_launcher_pods_command(tmp_path):
    """The rendered launcher pod, run here: its command, its literal env, the hostfile the MPI
    plugin mounts (two hosts, both this machine), real mpirun and DeepSpeed (gloo, CPU)."""
    port = free_port()
    obj = trainjob(deepspeed_job(nodes=2), master_port=port)
    trainer = obj["spec"]["trainer"]
    workdir = tmp_path / "pod"
    workdir.mkdir()
    for f in (EXAMPLES / "deepspeed-digits").iterdir():  # code: null: the image's working directory holds it
        (workdir / f.name).write_bytes(f.read_bytes())
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1 slots=1\n127.0.0.1 slots=1\n")
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
           "HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join([str(ROOT / "core"), str(ROOT / "plugins")]),
           "OMPI_MCA_orte_default_hostfile": str(hostfile), "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
           "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path / "output"),
           **{e["name"]: e["value"] for e in trainer["env"] if "value" in e}}
    assert env[tj.MPI_ENV] == "1" and env["CLOUDTRAIN_MASTER_PORT"] == str(port)
    proc = subprocess.run(trainer["command"], env=env, cwd=workdir, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert float(re.search(r"test_accuracy ([0-9.]+)", out).group(1)) >= 0.8, out[-2000:]
    metrics = json.loads((tmp_path / "output" / "metrics.json").read_text())
    assert metrics["world_size"] == 2
