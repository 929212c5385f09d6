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
``OMPI_MCA_orte_default_hostfile`` listing every pod of the runtime's replicated jobs in their
order (``node`` before ``launcher`` in ``deepspeed-distributed``), the launcher among them when it
runs as a node.  With ``runLauncherAsNode`` the plugin makes ``max(numNodes - 1, 1)`` node pods
(kubeflow/trainer pkg/runtime/framework/plugins/mpi/mpi.go, EnforceMLPolicy, isNode and
buildHostFileConfigMap; replicated-job order: pkg/runtime/framework/plugins/jobset/jobset.go
syncPodNetwork), so a one-node job's hostfile names two pods: the launcher and an sshd pod.  The
node count is therefore the job's (``CLOUDTRAIN_TRAINER_NODES``, set by cloudtrain's TrainJob),
never the hostfile's length; the launcher (this pod, by hostname) is put first and is node 0, as
for Kubeflow's MPIJob, whose reading of the hostfile this reuses.

Every node of an MPI runtime (``main``, ``python3 -m cloudtrain_kubernetes.trainer_detect -- NODE
COMMAND``): the runtime runs the TrainJob's command on its launcher pod only, the ``node`` pods
run sshd (tests/data/runtimes/deepspeed_distributed.yaml; kubeflow/trainer
pkg/runtime/framework/plugins/jobset/builder.go gives ``spec.trainer``'s image and command to the
``trainjob-ancestor-step: trainer`` job only).  For a type whose launcher runs on every node
(deepspeed), the launcher pod starts one process per host of the MPI plugin's hostfile
(``/etc/mpi/hostfile`` through ``OMPI_MCA_orte_default_hostfile``, the launcher first with
``runLauncherAsNode``: kubeflow/trainer pkg/runtime/framework/plugins/mpi/mpi.go,
buildHostFileConfigMap) with ``mpirun``, as an MPIJob's launcher starts ranks; each runs the node
command, i.e. cloudtrain's launcher, which takes its node rank from ``OMPI_COMM_WORLD_RANK``
(``CLOUDTRAIN_TRAINER_FANOUT`` set) and the host list from ``CLOUDTRAIN_HOSTS``.

cloudtrain's TrainJob sets ``CLOUDTRAIN_TRAINER_RUNTIME`` (the runtime's name) in
``spec.trainer.env``, which tells its pods from a training-operator v1 PyTorchJob's (those also
set ``MASTER_ADDR``) without guessing.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Dict, List, Mapping, Optional, Tuple

from cloudtrain.launch.topology import Topology, env_int, split_hosts

from .detect import HOSTFILE, HOSTS, _mpijob

PLATFORM = "kubeflow-trainer"
RUNTIME = "CLOUDTRAIN_TRAINER_RUNTIME"
MPI_ENV = "CLOUDTRAIN_TRAINER_MPI"
NODES = "CLOUDTRAIN_TRAINER_NODES"    # the job's node count (the hostfile may list one more pod)
FANOUT = "CLOUDTRAIN_TRAINER_FANOUT"   # a node started by the launcher pod's mpirun: its node rank
MPI_RANK = "OMPI_COMM_WORLD_RANK"
# What mpirun tells the processes it starts (Open MPI, its PMIx and PRRTE runtimes): dropped before
# the node's launcher runs, which is no MPI process; DeepSpeed, for one, trusts
# OMPI_COMM_WORLD_LOCAL_RANK over LOCAL_RANK and refuses a conflict (runtime/engine.py).
MPI_PREFIXES = ("OMPI_", "PMIX_", "PRTE_", "OPAL_", "ORTE_")
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
        if not environ.get(FANOUT, "").isdigit():  # the runtime's hostfile: the launcher first, the job's nodes
            hosts, slots = job_hosts(topology.hosts, topology.slots, environ)
            topology.hosts, topology.slots, topology.num_nodes, topology.master_addr = hosts, slots, len(hosts), hosts[0]
        if environ.get(FANOUT, "").isdigit():  # started by the launcher pod's mpirun (node_main)
            topology.node_rank = int(environ[FANOUT])
        return topology
    return None


def _own_host(environ: Mapping[str, str]) -> str:
    import socket
    return (environ.get("HOSTNAME") or socket.gethostname()).split(".", 1)[0]


def job_hosts(hosts: List[str], slots: Optional[List[int]], environ: Mapping[str, str]
              ) -> Tuple[List[str], Optional[List[int]]]:
    """The MPI plugin's hostfile hosts -> the job's: this pod (the launcher, matched by hostname:
    JobSet sets it to ``<trainjob>-launcher-0-0``) first, then the others in hostfile order, cut
    to ``CLOUDTRAIN_TRAINER_NODES`` (``runLauncherAsNode`` with one node lists an sshd pod too,
    kubeflow/trainer mpi.go: ``max(numNodes-1, 1)`` node pods)."""
    me = _own_host(environ)
    order = sorted(range(len(hosts)), key=lambda i: hosts[i].split(".", 1)[0] != me)
    nodes = environ.get(NODES, "")
    keep = order[:int(nodes)] if nodes.isdigit() and int(nodes) > 0 else order
    return [hosts[i] for i in keep], ([slots[i] for i in keep] if slots else slots)


# -- every node of an MPI runtime: the launcher pod starts one node command per host ----------------
def fanout_argv(command: List[str], environ: Mapping[str, str], is_root: bool,
                python: str = "python3") -> Tuple[List[str], Dict[str, str]]:
    """(mpirun argv, its environment) that run ``command`` once on every host of the MPI plugin's
    hostfile, in hostfile order (rank i on host i: one slot per host, ``--map-by slot``).  The
    environment drops the plugin's default hostfile (its ``slots=numProcPerNode`` would place
    several copies on a host) and adds the host list and ``FANOUT``; ``-x`` forwards what a node
    must see (cloudtrain.launch.plans.forwarded_names: ``CLOUDTRAIN_*``, NCCL/FI/UCX, the job's
    env and secrets by name), since ranks started over ssh get none of their pod's env."""
    from cloudtrain.launch.plans import Settings, forwarded_names
    from .detect import parse_hostfile
    hosts = split_hosts(environ.get(HOSTS, ""))
    path = environ.get(HOSTFILE, "")
    if not hosts and path and os.path.isfile(path):
        with open(path) as f:
            hosts = job_hosts(parse_hostfile(f.read())[0], None, environ)[0]
    if not hosts:
        raise ValueError("no host list: neither %s nor a readable %s (%r)" % (HOSTS, HOSTFILE, path))
    # the plugin's ssh options (OMPI_MCA_plm_rsh_args) stay in the environment, where it put them
    env = {k: v for k, v in environ.items() if not k.startswith("OMPI_MCA_orte_")}
    env[HOSTS] = ",".join(hosts)
    names = split_hosts(environ.get("CLOUDTRAIN_ENV_NAMES", ""))
    merged: Dict[str, int] = {}
    for host in hosts:  # nodes that share an address (emulation on one machine) share its slots
        merged[host] = merged.get(host, 0) + 1
    argv = ["mpirun"] + (["--allow-run-as-root"] if is_root else []) + [
        "-np", str(len(hosts)), "-H", ",".join("%s:%d" % hn for hn in merged.items()),
        "--map-by", "slot", "--bind-to", "none"]
    for name in forwarded_names(env, Settings(distribution="none", command=list(command), env_names=names)):
        argv += ["-x", name]
    return argv + [python, "-m", _module_name(), "--node", "--"] + list(command), env


def _module_name() -> str:
    return __spec__.name if __spec__ is not None and __spec__.name != "__main__" else "cloudtrain_kubernetes.trainer_detect"


def node_environment(environ: Mapping[str, str]) -> Dict[str, str]:
    """A node's environment under the fan-out: its rank (``FANOUT``), without mpirun's variables."""
    rank = environ.get(MPI_RANK, "")
    if not rank.isdigit():
        raise ValueError("%s is not set: the node command runs under the launcher pod's mpirun only" % MPI_RANK)
    env = {k: v for k, v in environ.items() if not k.startswith(MPI_PREFIXES)}
    env[FANOUT] = rank
    return env


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m cloudtrain_kubernetes.trainer_detect -- NODE COMMAND``: on an MPI runtime's
    launcher pod, run NODE COMMAND on every node (``fanout_argv``) and exit with mpirun's code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    node = argv[:1] == ["--node"]
    argv = argv[1:] if node else argv
    python = "python3"
    if argv[:1] == ["--python"] and len(argv) > 1:
        python, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python3 -m cloudtrain_kubernetes.trainer_detect [--node] [--python NAME] -- NODE COMMAND",
              file=sys.stderr)
        return 2
    try:
        if node:  # on each node: mpirun's variables out, the node rank in, then the node command
            os.execvpe(argv[0], argv, node_environment(os.environ))
        mpirun, env = fanout_argv(argv, os.environ, hasattr(os, "geteuid") and os.geteuid() == 0, python)
    except ValueError as exc:
        print("cloudtrain launch: %s" % exc, file=sys.stderr)
        return 2
    except FileNotFoundError:
        print("cloudtrain launch: %s: command not found on this node" % argv[0], file=sys.stderr)
        return 127
    try:
        os.execvpe(mpirun[0], mpirun, env)
    except FileNotFoundError:
        print("cloudtrain launch: mpirun: command not found on the launcher pod; an MPI runtime's image needs "
              "Open MPI", file=sys.stderr)
        return 127


def kubeflow_trainer_environment(mpi: bool, nodes: int, node_index: int, hosts: List[str], master_port: int,
                                 nproc_per_node: int, runtime: str) -> Dict[str, str]:
    """What node ``node_index`` of a TrainJob sees: the Trainer plugins' variables, the Indexed
    Job's ``JOB_COMPLETION_INDEX`` and what cloudtrain's TrainJob sets.  ``CLOUDTRAIN_HOSTS``
    stands in for the JobSet's pod names, which do not resolve on this machine."""
    env = {RUNTIME: runtime, HOSTS: ",".join(hosts), "CLOUDTRAIN_MASTER_PORT": str(master_port)}
    if mpi:
        # the launcher (node 0) reads the hostfile; under emulation every node runs the
        # launcher, so the others learn their place from CLOUDTRAIN_REPLICA_INDEX.  The host list
        # is the one the runtime's hostfile holds (runtime_hostfile_hosts), which the detector
        # cuts to the job's nodes as in the pod.
        env.update({MPI_ENV: "1", HOSTFILE: "/etc/mpi/hostfile", NODES: str(nodes),
                    HOSTS: ",".join(runtime_hostfile_hosts(hosts)),
                    "CLOUDTRAIN_KUBEFLOW_ROLE": "launcher" if node_index == 0 else "worker"})
        if node_index:
            env["CLOUDTRAIN_REPLICA_INDEX"] = str(node_index)
        return env
    env.update({"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(nproc_per_node),
                "PET_NODE_RANK": str(node_index), "JOB_COMPLETION_INDEX": str(node_index),
                "PET_MASTER_ADDR": hosts[0], "PET_MASTER_PORT": str(master_port)})
    return env


def runtime_hostfile_hosts(hosts: List[str]) -> List[str]:
    """The hosts the MPI plugin writes to the hostfile of a ``runLauncherAsNode`` runtime for a job
    on ``hosts`` (the launcher first): ``max(len(hosts) - 1, 1)`` node pods and the launcher
    (kubeflow/trainer mpi.go EnforceMLPolicy, isNode).  One node: the launcher and one sshd pod,
    which under emulation shares the launcher's address."""
    return list(hosts) if len(hosts) > 1 else list(hosts) * 2


def emulate(job, node_index: int, cluster) -> Dict[str, str]:
    """A TrainJob pod's variables (control plane: to emulate Kubeflow Trainer on this machine)."""
    from .trainjob import DEFAULT_RUNTIMES
    t = job.distribution.type
    # the MPI runtimes' launcher runs the command (deepspeed-distributed; one named for mpi/horovod)
    mpi = t in ("mpi", "horovod", "deepspeed")
    return kubeflow_trainer_environment(mpi, job.distribution.nodes, node_index, list(cluster.hosts),
                                        cluster.master_port, job.procs_per_node, DEFAULT_RUNTIMES.get(t, "named"))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
