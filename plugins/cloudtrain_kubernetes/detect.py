"""What a Kubeflow or Volcano pod sees, both ways: ``detect`` (in the node) and ``environment``
(the inverse, used to emulate these platforms on this machine).

Standard library only, Python >= 3.8: shipped into the pod with the launcher.

Kubeflow, by the kind the pod belongs to (``CLOUDTRAIN_KUBEFLOW_KIND``, set by cloudtrain's
manifests; without it the kind is guessed from what the operator injected):

- PyTorchJob: the training operator sets ``MASTER_ADDR`` (``<job>-master-0``), ``MASTER_PORT``,
  ``RANK`` = the *node* index (Master 0, Worker i -> i+1), ``WORLD_SIZE`` (nodes x nprocPerNode
  in recent operators, nodes in old ones: not used), ``PET_NNODES`` (``min:max`` when elastic),
  ``PET_NODE_RANK``, ``PET_NPROC_PER_NODE``.  Hosts are ``CLOUDTRAIN_HOSTS`` when cloudtrain set
  it, else derived from the operator's naming (``<job>-master-0``, ``<job>-worker-<i>``).
- MPIJob (v2beta1): only the Launcher pod runs the launcher; the operator mounts a hostfile at
  ``OMPI_MCA_orte_default_hostfile`` (``<job>-worker-<i>.<job>.<ns>.svc slots=<n>``).  The
  launcher is node 0 of the topology and mpirun places every rank on the Worker pods.
- TFJob: ``TF_CONFIG`` (cluster ``ps``/``worker``/``chief`` lists and this task); node ranks
  run chief, ps, then workers, and the operator's TF_CONFIG is kept as it is.

Volcano (``svc`` and ``env`` plugins): ``VC_TASK_INDEX`` (index within the pod's task),
``VC_<TASK>_HOSTS`` / ``VC_<TASK>_NUM`` for every task.  Node ranks follow the task order in
``CLOUDTRAIN_VOLCANO_TASKS`` (cloudtrain's manifests set it; otherwise master/head/launcher/
chief/ps first, then the rest by name); this pod's task is ``CLOUDTRAIN_VOLCANO_TASK`` or the
task whose host list holds this pod's hostname.  ``CLOUDTRAIN_VOLCANO_RETRY_COUNT`` (the pod's
``volcano.sh/job-retry-count`` annotation through the downward API: how often Volcano restarted
the job, Volcano >= 1.11) is the node's ``CLOUDTRAIN_RESTART_COUNT``; empty (an older Volcano),
it is not set.
"""
from __future__ import annotations

import json
import os
import re
import socket
from typing import Dict, List, Mapping, Optional, Tuple

from cloudtrain.launch.platform import Platform
from cloudtrain.launch.topology import DEFAULT_MASTER_PORT, Topology, env_int, split_hosts

KIND = "CLOUDTRAIN_KUBEFLOW_KIND"
ROLE = "CLOUDTRAIN_KUBEFLOW_ROLE"
HOSTS = "CLOUDTRAIN_HOSTS"
HOSTFILE = "OMPI_MCA_orte_default_hostfile"
VOLCANO_TASKS = "CLOUDTRAIN_VOLCANO_TASKS"
VOLCANO_TASK = "CLOUDTRAIN_VOLCANO_TASK"
VOLCANO_RETRY = "CLOUDTRAIN_VOLCANO_RETRY_COUNT"  # manifests.VOLCANO_RETRY_ENV
RESTART_COUNT = "CLOUDTRAIN_RESTART_COUNT"
FIRST_TASKS = ("master", "head", "launcher", "chief", "ps")
TF_ROLES = ("chief", "master", "ps", "worker")


def _port(environ: Mapping[str, str], *names: str) -> int:
    return env_int(environ, *names) or DEFAULT_MASTER_PORT


# -- Kubeflow -----------------------------------------------------------------------------------
def detect_kubeflow(environ: Mapping[str, str]) -> Optional[Topology]:
    kind = environ.get(KIND)
    if kind == "MPIJob" or (not kind and os.path.isfile(environ.get(HOSTFILE, "")) and "PET_NNODES" not in environ):
        return _mpijob(environ)  # a guess only with a readable hostfile: other MPI platforms set it too
    if kind == "TFJob" or (not kind and "TF_CONFIG" in environ):
        return _tfjob(environ)
    if kind == "PyTorchJob" or (not kind and "PET_NNODES" in environ and "MASTER_ADDR" in environ):
        return _pytorchjob(environ)
    return None


def operator_hosts(master_addr: str, nodes: int) -> List[str]:
    """PyTorchJob's pod names from its master's: ``x-master-0`` -> ``x-master-0, x-worker-0...``."""
    head, sep, tail = master_addr.partition(".")
    if not head.endswith("-master-0"):
        return []
    base = head[:-len("-master-0")]
    suffix = sep + tail
    return [head + suffix] + ["%s-worker-%d%s" % (base, i, suffix) for i in range(nodes - 1)]


def _pytorchjob(environ: Mapping[str, str]) -> Topology:
    nnodes = environ.get("PET_NNODES", "1")
    nodes = int(nnodes.split(":")[-1])
    hosts = split_hosts(environ.get(HOSTS, ""))
    # a Workers-only PyTorchJob (`none`): no MASTER_ADDR nor RANK from the operator, the index is
    # the pod's replica-index label (CLOUDTRAIN_REPLICA_INDEX) and node 0 is worker 0
    master = environ.get("MASTER_ADDR") or environ.get("PET_MASTER_ADDR") or (hosts[0] if hosts else "127.0.0.1")
    hosts = hosts or operator_hosts(master, nodes)
    return Topology(
        platform="kubeflow",
        node_rank=env_int(environ, "PET_NODE_RANK", "RANK", "CLOUDTRAIN_REPLICA_INDEX") or 0,
        num_nodes=nodes,
        master_addr=master,
        master_port=_port(environ, "MASTER_PORT", "PET_MASTER_PORT"),
        hosts=hosts,
        nproc_per_node=env_int(environ, "PET_NPROC_PER_NODE"),
    )


def parse_hostfile(text: str) -> Tuple[List[str], List[int]]:
    """Open MPI hostfile lines (``host slots=4`` or ``host:4`` or ``host``) -> hosts, slots."""
    hosts, slots = [], []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        host, n = parts[0], 1
        for part in parts[1:]:
            if part.startswith("slots="):
                n = int(part.split("=", 1)[1])
        if ":" in host and host.rsplit(":", 1)[1].isdigit():
            host, count = host.rsplit(":", 1)
            n = int(count)
        hosts.append(host)
        slots.append(n)
    return hosts, slots


def _mpijob(environ: Mapping[str, str]) -> Topology:
    hosts = split_hosts(environ.get(HOSTS, ""))
    slots = None
    path = environ.get(HOSTFILE)
    if not hosts and path and os.path.isfile(path):
        with open(path) as f:
            hosts, slots = parse_hostfile(f.read())
    if not hosts:
        raise ValueError("MPIJob launcher without a host list: neither %s nor a readable %s (%r)"
                         % (HOSTS, HOSTFILE, path))
    # The Launcher runs mpirun (node 0); Worker pods only run sshd.  Under emulation every node
    # runs the launcher, so a worker's place comes from CLOUDTRAIN_REPLICA_INDEX.
    rank = 0 if environ.get(ROLE, "launcher").lower() == "launcher" else env_int(environ, "CLOUDTRAIN_REPLICA_INDEX") or 0
    return Topology(platform="kubeflow", node_rank=rank, num_nodes=len(hosts), master_addr=hosts[0],
                    master_port=_port(environ, "CLOUDTRAIN_MASTER_PORT"), hosts=hosts,
                    nproc_per_node=(slots[0] if slots else None), slots=slots, hostfile=path)


def _tf_host(address: str) -> str:
    return address.rsplit(":", 1)[0] if ":" in address else address


def _tfjob(environ: Mapping[str, str]) -> Topology:
    config = json.loads(environ["TF_CONFIG"])
    cluster, task = config.get("cluster", {}), config.get("task", {})
    order = [r for r in TF_ROLES if r in cluster] + sorted(r for r in cluster if r not in TF_ROLES)
    addresses, rank = [], None
    for role in order:
        if role == task.get("type"):
            rank = len(addresses) + int(task.get("index", 0))
        addresses += cluster[role]
    if rank is None:
        raise ValueError("TF_CONFIG task %r is not in its cluster %s" % (task, sorted(cluster)))
    hosts = [_tf_host(a) for a in addresses]
    return Topology(platform="kubeflow", node_rank=rank, num_nodes=len(hosts), master_addr=hosts[0],
                    master_port=_port(environ, "CLOUDTRAIN_MASTER_PORT"), hosts=hosts, tf_config=config)


def kubeflow_kind(distribution: str) -> str:
    return {"mpi": "MPIJob", "horovod": "MPIJob", "ps-worker": "TFJob"}.get(distribution, "PyTorchJob")


def kubeflow_environment(distribution: str, nodes: int, node_index: int, hosts: List[str], master_port: int,
                         nproc_per_node: int, ps: int = 1) -> Dict[str, str]:
    """What a Kubeflow pod of node ``node_index`` sees: the operator's variables plus those
    cloudtrain's manifest sets (``CLOUDTRAIN_KUBEFLOW_KIND``/``_ROLE``, ``CLOUDTRAIN_HOSTS``)."""
    kind = kubeflow_kind(distribution)
    env = {KIND: kind, HOSTS: ",".join(hosts), "CLOUDTRAIN_MASTER_PORT": str(master_port)}
    if kind == "PyTorchJob" and distribution == "none":  # Workers only (manifests.pytorch_job)
        env.update({ROLE: "worker", "CLOUDTRAIN_REPLICA_INDEX": str(node_index), "PET_NNODES": str(nodes),
                    "PET_NPROC_PER_NODE": str(nproc_per_node), "PYTHONUNBUFFERED": "1"})
    elif kind == "PyTorchJob":
        env.update({
            ROLE: "master" if node_index == 0 else "worker",
            "MASTER_ADDR": hosts[0], "MASTER_PORT": str(master_port),
            "PET_MASTER_ADDR": hosts[0], "PET_MASTER_PORT": str(master_port),
            "RANK": str(node_index), "PET_NODE_RANK": str(node_index),
            "WORLD_SIZE": str(nodes * nproc_per_node), "PET_NNODES": str(nodes),
            "PET_NPROC_PER_NODE": str(nproc_per_node), "PYTHONUNBUFFERED": "1",
        })
    elif kind == "MPIJob":
        env.update({ROLE: "launcher" if node_index == 0 else "worker", HOSTFILE: "/etc/mpi/hostfile"})
        if node_index:
            env["CLOUDTRAIN_REPLICA_INDEX"] = str(node_index)
    else:
        # distinct ports per task, so emulated tasks sharing one address do not collide
        addrs = ["%s:%d" % (h, master_port + 2 + i) for i, h in enumerate(hosts)]
        task = {"type": "ps", "index": node_index} if node_index < ps else {"type": "worker", "index": node_index - ps}
        env[ROLE] = task["type"]
        env["TF_CONFIG"] = json.dumps({"cluster": {"ps": addrs[:ps], "worker": addrs[ps:]}, "task": task,
                                       "environment": "cloud"}, sort_keys=True)
    return env


# -- Volcano ------------------------------------------------------------------------------------
def _task_env(task: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", task).upper()


def _volcano_tasks(environ: Mapping[str, str]) -> List[str]:
    named = [t for t in environ.get(VOLCANO_TASKS, "").split(",") if t]
    if named:
        return named
    found = sorted(k[3:-6].lower() for k in environ if k.startswith("VC_") and k.endswith("_HOSTS"))
    return [t for t in FIRST_TASKS if t in found] + [t for t in found if t not in FIRST_TASKS]


def _short(host: str) -> str:
    return host.split(".", 1)[0]


def detect_volcano(environ: Mapping[str, str]) -> Optional[Topology]:
    if "VC_TASK_INDEX" not in environ:
        return None
    tasks = _volcano_tasks(environ)
    per_task = {t: split_hosts(environ.get("VC_%s_HOSTS" % _task_env(t), "")) for t in tasks}
    if not tasks or not any(per_task.values()):
        return None  # the env plugin without the svc plugin: no host lists to work from
    mine = environ.get(VOLCANO_TASK)
    if not mine:
        me = _short(environ.get("HOSTNAME") or socket.gethostname())
        mine = next((t for t in tasks if me in map(_short, per_task[t])), None)
    if mine not in per_task:
        raise ValueError("cannot tell this pod's Volcano task (tasks: %s); set %s" % (", ".join(tasks), VOLCANO_TASK))
    hosts: List[str] = []
    rank = 0
    for task in tasks:
        if task == mine:
            rank = len(hosts) + (env_int(environ, "VC_TASK_INDEX") or 0)
        hosts += per_task[task]
    retries = environ.get(VOLCANO_RETRY, "").strip()
    return Topology(platform="volcano", node_rank=rank, num_nodes=len(hosts), master_addr=hosts[0],
                    master_port=_port(environ, "CLOUDTRAIN_MASTER_PORT", "MASTER_PORT"), hosts=hosts,
                    env={RESTART_COUNT: retries} if retries.isdigit() else {})


def volcano_environment(tasks: List[Tuple[str, int]], node_index: int, hosts: List[str],
                        master_port: int) -> Dict[str, str]:
    """What the pod of node ``node_index`` sees: the ``svc``/``env`` plugins' variables for
    ``tasks`` ([(name, replicas)] in node order) plus those cloudtrain's manifest sets."""
    env = {VOLCANO_TASKS: ",".join(t for t, _ in tasks), "CLOUDTRAIN_MASTER_PORT": str(master_port),
           VOLCANO_RETRY: "0"}  # a first attempt's annotation
    start = 0
    for task, replicas in tasks:
        env["VC_%s_HOSTS" % _task_env(task)] = ",".join(hosts[start:start + replicas])
        env["VC_%s_NUM" % _task_env(task)] = str(replicas)
        if start <= node_index < start + replicas:
            env[VOLCANO_TASK] = task
            env["VC_TASK_INDEX"] = env["VK_TASK_INDEX"] = str(node_index - start)
        start += replicas
    return env


# -- KubeRay: the Ray driver of a RayJob (rayjob.py) ---------------------------------------------
def detect_kuberay(environ: Mapping[str, str]) -> Optional[Topology]:
    """The driver of a RayJob, on its head pod: node 0 of ``CLOUDTRAIN_KUBERAY_NODES`` (the Ray
    cluster KubeRay formed; Ray places the work, so no host list).  Named only (``--platform
    kuberay`` with ``CLOUDTRAIN_DETECTORS``): a head pod looks like nothing else."""
    nodes = env_int(environ, "CLOUDTRAIN_KUBERAY_NODES")
    if not nodes:
        return None
    host = environ.get("HOSTNAME") or socket.gethostname()
    return Topology(platform="kuberay", node_rank=0, num_nodes=nodes, master_addr=host,
                    master_port=_port(environ, "CLOUDTRAIN_MASTER_PORT"), hosts=[host] if nodes == 1 else [])


# -- emulation (control plane: the job model is passed in) and the registrations --------------
def emulate_kubeflow(job, node_index: int, cluster) -> Dict[str, str]:
    return kubeflow_environment(job.distribution.type, job.distribution.nodes, node_index, list(cluster.hosts),
                                cluster.master_port, job.procs_per_node, job.ps)


def emulate_volcano(job, node_index: int, cluster) -> Dict[str, str]:
    from .manifests import volcano_tasks
    return volcano_environment(volcano_tasks(job), node_index, list(cluster.hosts), cluster.master_port)


# Volcano before Kubeflow: a Volcano pod of an MPI job has a hostfile too; Kubeflow's guesses
# (a readable MPI hostfile, TF_CONFIG, PET_NNODES with MASTER_ADDR) are the least specific.
PLATFORMS = (
    Platform("volcano", detect_volcano, priority=40, environment=emulate_volcano,
             prefixes=("VC_", "VK_"), variables=(VOLCANO_TASKS, VOLCANO_TASK, VOLCANO_RETRY)),
    # cloudtrain's TrainJob marks its pods (CLOUDTRAIN_TRAINER_RUNTIME): before Kubeflow v1's guesses
    Platform("kubeflow-trainer", "cloudtrain_kubernetes.trainer_detect:detect_kubeflow_trainer", priority=35,
             environment="cloudtrain_kubernetes.trainer_detect:emulate", ships=("cloudtrain_kubernetes.detect",),
             variables=("CLOUDTRAIN_TRAINER_RUNTIME", "CLOUDTRAIN_TRAINER_MPI", "CLOUDTRAIN_TRAINER_NODES")),
    Platform("kubeflow", detect_kubeflow, priority=30, environment=emulate_kubeflow,
             variables=(KIND, ROLE, HOSTS, "CLOUDTRAIN_REPLICA_INDEX")),
)
