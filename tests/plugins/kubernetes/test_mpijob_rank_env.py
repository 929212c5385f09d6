"""Every ``CLOUDTRAIN_*`` a node's pod is promised reaches every rank of a Kubeflow MPIJob.

On an MPIJob only the Launcher pod runs cloudtrain's launcher; mpirun starts every rank on the
Worker pods through ssh (kubeflow/mpi-operator: the workers run sshd, the launcher runs mpirun
over the hostfile ``OMPI_MCA_orte_default_hostfile`` it mounts), so a rank's environment is the
Launcher container's, forwarded by ``mpirun -x NAME``, never the Worker pod's own ``env``.
These tests render the manifests (kubeflow, and eks which reuses them), give the Launcher
container's environment plus the operator's hostfile to the real ``cloudtrain launch --print``
and read the mpirun command it would run.
"""
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cloudtrain.input.loading import job_from_dict
from conftest import EXAMPLES
from cloudtrain_kubernetes.provider import KubeflowProvider

ROOT = Path(__file__).resolve().parents[3]
STORAGE = {"checkpoint": "pvc://team-ckpt/digits/run-1", "output": "pvc://team-out/runs",
           "inputs": {"train": "pvc://team-data/digits/train"}}


def mpi_job(**extra):
    data = {"name": "allreduce", "command": "python train.py", "image": "pytorch/pytorch:2.4.0",
            "distribution": {"type": "mpi", "nodes": 2, "procs_per_node": 2},
            "code": str(EXAMPLES / "mpi-allreduce"), "storage": STORAGE, "env": {"OMP_NUM_THREADS": "1"}}
    data.update(extra)
    return job_from_dict(data)


def providers():
    out = [("kubeflow", KubeflowProvider, {})]
    from cloudtrain_aws.eks import EksProvider
    out.append(("eks", EksProvider, {"cluster": "c", "region": "us-east-1"}))
    return out


def replica_container(mpijob: dict, role: str) -> dict:
    return mpijob["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]


def literal_env(container: dict) -> dict:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def launcher_mpirun(launcher: dict, tmp_path: Path) -> list:
    """The mpirun argv the Launcher pod's ``cloudtrain launch`` runs, from its rendered command and
    env plus what mpi-operator adds: the hostfile (``<job>-worker-<i>.<job>.<ns>.svc slots=N``)."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("allreduce-worker-0.allreduce.default.svc slots=2\n"
                        "allreduce-worker-1.allreduce.default.svc slots=2\n")
    command = launcher["command"]
    launch = command[command.index("cloudtrain-node") + 1:]
    assert launch[1:3] == ["-m", "cloudtrain.launch"]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([str(ROOT / "core"), str(ROOT / "plugins")]),
           **literal_env(launcher), "OMPI_MCA_orte_default_hostfile": str(hostfile)}
    proc = subprocess.run([sys.executable, "-m", "cloudtrain.launch", "--print", *launch[3:]], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    argv = shlex.split(proc.stdout.strip().splitlines()[-1])
    assert argv[0] == "mpirun", argv
    return argv


@pytest.mark.parametrize("name,provider,options", providers(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_cloudtrain_variable_of_a_node_reaches_the_mpijob_ranks(tmp_path, name, provider, options):
    p = provider()
    mpijob = p.manifests(mpi_job(), p.Options(**options))[-1]
    assert mpijob["kind"] == "MPIJob"
    launcher, worker = replica_container(mpijob, "Launcher"), replica_container(mpijob, "Worker")
    argv = launcher_mpirun(launcher, tmp_path)
    forwarded = {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}
    launcher_env = literal_env(launcher)
    # What a Worker pod is told (and what the docs promise every node: CLOUDTRAIN_CHECKPOINT_DIR,
    # CLOUDTRAIN_OUTPUT_DIR, CLOUDTRAIN_INPUT_<NAME>, CLOUDTRAIN_JOB_ID, ...), less the role.
    promised = {k: v for k, v in literal_env(worker).items()
                if k.startswith("CLOUDTRAIN_") and k != "CLOUDTRAIN_KUBEFLOW_ROLE"}
    assert {"CLOUDTRAIN_CHECKPOINT_DIR", "CLOUDTRAIN_OUTPUT_DIR", "CLOUDTRAIN_INPUT_TRAIN",
            "CLOUDTRAIN_JOB_ID"} <= set(promised)
    for key, value in promised.items():
        assert key in forwarded, f"mpirun does not forward {key}: {argv}"
        assert launcher_env.get(key) == value, f"{key}: the launcher has {launcher_env.get(key)!r}, a node {value!r}"
    assert launcher_env["CLOUDTRAIN_CHECKPOINT_DIR"] == "/cloudtrain/checkpoint"
    # the launcher mounts no claim (its pod runs no rank); the workers, where the ranks run, do
    assert not any(v["name"] == "cloudtrain-checkpoint" for v in launcher["volumeMounts"])
    assert any(v["mountPath"] == "/cloudtrain/checkpoint" for v in worker["volumeMounts"])


def test_the_user_env_and_secrets_reach_the_mpijob_ranks_by_name(tmp_path, monkeypatch):
    """The job's own env and secrets (not CLOUDTRAIN_*) are forwarded by name through
    CLOUDTRAIN_ENV_NAMES; the secret's value stays in its Secret (valueFrom) and off the argv."""
    monkeypatch.setenv("CT_MPI_RANK_SECRET", "never-on-a-command-line-5521")
    p = KubeflowProvider()
    job = mpi_job(env={"OMP_NUM_THREADS": "1", "MY_FLAG": "on"},
                  secrets={"HF_TOKEN": {"from_env": "CT_MPI_RANK_SECRET"}})
    launcher = replica_container(p.manifests(job, p.Options())[-1], "Launcher")
    argv = launcher_mpirun(launcher, tmp_path)
    forwarded = {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}
    assert {"MY_FLAG", "OMP_NUM_THREADS"} <= forwarded
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "allreduce-secrets", "key": "HF_TOKEN"}}} \
        in launcher["env"]
    assert "never-on-a-command-line-5521" not in " ".join(argv)
