"""What a Kubeflow Trainer v2 (TrainJob) pod sees, both ways: ``detect_kubeflow_trainer`` (in
the node) and ``kubeflow_trainer_environment`` (the inverse, to emulate it on this machine).

Standard library only, Python >= 3.8: shipped into the pod with the launcher.

The Trainer controller builds a JobSet whose ``node`` replicated job is one Indexed Job of
``numNodes`` pods; pod ``i`` is ``<trainjob>-node-0-<i>`` in the headless service
``<trainjob>``.  Torch runtimes (``torch-distributed``): the torch plugin sets ``PET_NNODES``,
``PET_NPROC_PER_NODE`` (a number, or ``auto``), ``PET_NODE_RANK`` (from the Job completion index),
``PET_MASTER_ADDR`` = ``<trainjob>-node-0-0.<trainjob>`` and ``PET_MASTER_PORT`` = 29500
(kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go, pkg/constants).  Hosts are
``CLOUDTRAIN_HOSTS`` when set (emulation), else derived from that naming.

MPI runtimes (``deepspeed-distributed``, or one the job names for mpi/horovod): only the
launcher runs the command (the other pods run sshd); the MPI plugin mounts a hostfile at
``OMPI_MCA_orte_default_hostfile`` listing the launcher first when it runs as a node.  The
launcher is node 0, as for Kubeflow's MPIJob, whose reading of the hostfile this reuses.

cloudtrain's TrainJob sets ``CLOUDTRAIN_TRAINER_RUNTIME`` (the runtime's name) in
``spec.trainer.env``, which tells its pods from a training-operator v1 PyTorchJob's (those also
set ``MASTER_ADDR``) without guessing.
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional

from cloudtrain.launch.topology import Topology, env_int, split_hosts

from .detect import HOSTFILE, HOSTS, _mpijob

PLATFORM = "kubeflow-trainer"
RUNTIME = "CLOUDTRAIN_TRAINER_RUNTIME"
MPI_ENV = "CLOUDTRAIN_TRAINER_MPI"
TRAINER_PORT = 29500
_MASTER = re.compile(r"^(?P<name>[a-z0-9]([-a-z0-9]*[a-z0-9])?)-node-0-0\.(?P=name)(?P<domain>(\..*)?)$")


def jobset_hosts(master_addr: str, nodes: int) -> List[str]:
    """``x-node-0-0.x[.ns.svc]`` -> every node pod's address (``x-node-0-<i>.x[...]``)."""
    match = _MASTER.match(master_addr)
    if not match:
        return []
    name, domain = match.group("name"), match.group("domain")
    return ["%s-node-0-%d.%s%s" % (name, i, name, domain) for i in range(nodes)]


def detect_kubeflow_trainer(environ: Mapping[str, str]) -> Optional[Topology]:
    master = environ.get("PET_MASTER_ADDR", "")
    ours = RUNTIME in environ
    if "PET_NNODES" in environ and master and (ours or (_MASTER.match(master) and "MASTER_ADDR" not in environ)):
        nodes = int(environ["PET_NNODES"].split(":")[-1])
        nproc = environ.get("PET_NPROC_PER_NODE", "")
        return Topology(
            platform=PLATFORM,
            node_rank=env_int(environ, "PET_NODE_RANK", "JOB_COMPLETION_INDEX") or 0,
            num_nodes=nodes,
            master_addr=master,
            master_port=env_int(environ, "PET_MASTER_PORT") or TRAINER_PORT,
            hosts=split_hosts(environ.get(HOSTS, "")) or jobset_hosts(master, nodes),
            nproc_per_node=int(nproc) if nproc.isdigit() else None,  # "auto": the launcher's own
        )
    if ours and (environ.get(MPI_ENV) or HOSTFILE in environ):
        topology = _mpijob(environ)
        topology.platform = PLATFORM
        return topology
    return None


def kubeflow_trainer_environment(mpi: bool, nodes: int, node_index: int, hosts: List[str], master_port: int,
                                 nproc_per_node: int, runtime: str) -> Dict[str, str]:
    """What node ``node_index`` of a TrainJob sees: the Trainer plugins' variables, the Indexed
    Job's ``JOB_COMPLETION_INDEX`` and what cloudtrain's TrainJob sets.  ``CLOUDTRAIN_HOSTS``
    stands in for the JobSet's pod names, which do not resolve on this machine."""
    env = {RUNTIME: runtime, HOSTS: ",".join(hosts), "CLOUDTRAIN_MASTER_PORT": str(master_port)}
    if mpi:
        # the launcher (node 0) reads the hostfile; under emulation every node runs the
        # launcher, so the others learn their place from CLOUDTRAIN_REPLICA_INDEX
        env.update({MPI_ENV: "1", HOSTFILE: "/etc/mpi/hostfile",
                    "CLOUDTRAIN_KUBEFLOW_ROLE": "launcher" if node_index == 0 else "worker"})
        if node_index:
            env["CLOUDTRAIN_REPLICA_INDEX"] = str(node_index)
        return env
    env.update({"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(nproc_per_node),
                "PET_NODE_RANK": str(node_index), "JOB_COMPLETION_INDEX": str(node_index),
                "PET_MASTER_ADDR": hosts[0], "PET_MASTER_PORT": str(master_port)})
    return env


def emulate(job, node_index: int, cluster) -> Dict[str, str]:
    """A TrainJob pod's variables (control plane: to emulate Kubeflow Trainer on this machine)."""
    from .trainjob import DEFAULT_RUNTIMES
    t = job.distribution.type
    # the MPI runtimes' launcher runs the command (deepspeed-distributed; one named for mpi/horovod)
    mpi = t in ("mpi", "horovod", "deepspeed")
    return kubeflow_trainer_environment(mpi, job.distribution.nodes, node_index, list(cluster.hosts),
                                        cluster.master_port, job.procs_per_node, DEFAULT_RUNTIMES.get(t, "named"))
