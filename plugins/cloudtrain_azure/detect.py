"""Azure ML's node environment: ``detect(environ)`` and its inverse ``node_environment``.

Standard library only, Python >= 3.8: ``cloudtrain launch`` imports this inside the training
image (the azure provider ships it with the code).

What Azure ML injects (Microsoft's distributed GPU training guide, how-to-train-distributed-gpu):

- PyTorch distribution: ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``NODE_RANK`` per
  node and ``RANK``, ``LOCAL_RANK`` per process.  ``WORLD_SIZE`` counts *processes*.  cloudtrain
  asks for one process per node (``process_count_per_instance: 1``), so there it equals the
  node count and ``RANK`` equals ``NODE_RANK``: ``cloudtrain launch`` then starts the node's
  processes (torchrun, deepspeed).
- MPI distribution (Open MPI): ``OMPI_COMM_WORLD_RANK`` / ``_SIZE`` / ``_LOCAL_RANK`` /
  ``_LOCAL_SIZE`` per rank and ``AZ_BATCH_MASTER_NODE`` (``addr:port``), or only
  ``AZ_BATCHAI_MPI_MASTER_NODE`` (``addr``) on a single node.  With one process per node the
  world rank is the node rank; ``OMPI_COMM_WORLD_NODE_RANK`` is *not* (it is 0 on every node).
- TensorFlow distribution: ``TF_CONFIG`` (``cluster`` of ``host:2222`` lists, ``task``).
- ``AZ_BATCH_HOST_LIST`` (``ip,ip``), the node list of Azure Batch multi-instance tasks, which
  AmlCompute jobs carry (not in Azure ML's documentation; used by Microsoft's own training code):
  the host list when present.

Every Azure ML job also has ``AZUREML_*`` variables (``AZUREML_RUN_ID``,
``AZUREML_EXPERIMENT_ID``); without one of them, or an ``AZ_BATCH*`` variable, this is not
Azure ML and ``detect`` returns None, so that Kubeflow's or Volcano's look-alike variables are
left to their own detectors.
"""
from __future__ import annotations

import json
from typing import Dict, List, Mapping, Optional, Sequence

from cloudtrain.launch.platform import Platform
from cloudtrain.launch.topology import Topology, env_int, split_hosts

PLATFORM = "azure"
# Azure ML's documented default master port of the PyTorch distribution (v1 docs).
DEFAULT_MASTER_PORT = 6105
MARKERS = ("AZUREML_RUN_ID", "AZUREML_EXPERIMENT_ID", "AZ_BATCH_MASTER_NODE", "AZ_BATCHAI_MPI_MASTER_NODE",
           "AZ_BATCH_HOST_LIST")
TF_ROLES = ("chief", "ps", "worker")  # node order: cloudtrain puts the parameter servers first
PER_NODE = ("cloudtrain launch runs once per node and starts the node's processes itself; submit with "
            "cloudtrain (process_count_per_instance: 1) or give the job distribution type none")


def is_azure(environ: Mapping[str, str]) -> bool:
    return any(environ.get(name) for name in MARKERS)


def detect(environ: Mapping[str, str]) -> Optional[Topology]:
    if not is_azure(environ):
        return None
    output_dir = environ.get("CLOUDTRAIN_OUTPUT_DIR") or None
    if environ.get("TF_CONFIG"):
        return _tensorflow(environ, output_dir)
    if "NODE_RANK" in environ and "WORLD_SIZE" in environ:
        return _pytorch(environ, output_dir)
    if "OMPI_COMM_WORLD_RANK" in environ:
        return _mpi(environ, output_dir)
    # No distribution: one node on its own.
    master = environ.get("MASTER_ADDR") or "127.0.0.1"
    return Topology(platform=PLATFORM, master_addr=master,
                    master_port=env_int(environ, "MASTER_PORT") or DEFAULT_MASTER_PORT,
                    hosts=[master], output_dir=output_dir)


def _hosts(environ: Mapping[str, str], num_nodes: int, master: str) -> List[str]:
    hosts = split_hosts(environ.get("AZ_BATCH_HOST_LIST", ""))
    if len(hosts) == num_nodes:
        return hosts
    return [master] if num_nodes == 1 else []


def _pytorch(environ: Mapping[str, str], output_dir: Optional[str]) -> Topology:
    node_rank = env_int(environ, "NODE_RANK")
    world = env_int(environ, "WORLD_SIZE")
    rank = env_int(environ, "RANK")
    local_rank = env_int(environ, "LOCAL_RANK")
    if (local_rank or 0) != 0 or (rank is not None and rank != node_rank):
        raise ValueError("Azure ML started several processes on this node (RANK=%s, LOCAL_RANK=%s, NODE_RANK=%s): "
                         "process_count_per_instance is above 1; %s" % (rank, local_rank, node_rank, PER_NODE))
    master = environ.get("MASTER_ADDR") or "127.0.0.1"
    return Topology(platform=PLATFORM, node_rank=node_rank, num_nodes=world, master_addr=master,
                    master_port=env_int(environ, "MASTER_PORT") or DEFAULT_MASTER_PORT,
                    hosts=_hosts(environ, world, master), output_dir=output_dir)


def _mpi(environ: Mapping[str, str], output_dir: Optional[str]) -> Topology:
    rank = env_int(environ, "OMPI_COMM_WORLD_RANK")
    size = env_int(environ, "OMPI_COMM_WORLD_SIZE") or 1
    local_size = env_int(environ, "OMPI_COMM_WORLD_LOCAL_SIZE") or 1
    if local_size > 1:
        raise ValueError("Azure ML's mpirun started %d processes on this node (OMPI_COMM_WORLD_LOCAL_SIZE): "
                         "process_count_per_instance is above 1; %s" % (local_size, PER_NODE))
    # Several nodes: AZ_BATCH_MASTER_NODE=addr:port; one node: AZ_BATCHAI_MPI_MASTER_NODE=addr.
    master_node = environ.get("AZ_BATCH_MASTER_NODE", "")
    addr, _, port = master_node.rpartition(":") if ":" in master_node else (master_node, "", "")
    addr = addr or environ.get("AZ_BATCHAI_MPI_MASTER_NODE") or environ.get("MASTER_ADDR") or "127.0.0.1"
    master_port = env_int(environ, "MASTER_PORT") or (int(port) if port.isdigit() else DEFAULT_MASTER_PORT)
    return Topology(platform=PLATFORM, node_rank=rank, num_nodes=size, master_addr=addr, master_port=master_port,
                    hosts=_hosts(environ, size, addr), output_dir=output_dir)


def _tensorflow(environ: Mapping[str, str], output_dir: Optional[str]) -> Topology:
    try:
        config = json.loads(environ["TF_CONFIG"])
        cluster, task = config["cluster"], config["task"]
        members = [(role, i, addr) for role in TF_ROLES for i, addr in enumerate(cluster.get(role) or [])]
        node_rank = [(role, i) for role, i, _ in members].index((task["type"], int(task["index"])))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("TF_CONFIG from Azure ML cannot be read (%s): %r" % (exc, environ["TF_CONFIG"][:200]))
    addrs = [addr for _, _, addr in members]
    host, _, port = addrs[0].rpartition(":")
    return Topology(platform=PLATFORM, node_rank=node_rank, num_nodes=len(addrs), master_addr=host,
                    master_port=int(port) if port.isdigit() else DEFAULT_MASTER_PORT,
                    hosts=[a.rpartition(":")[0] or a for a in addrs], tf_config=config, output_dir=output_dir)


def node_environment(distribution: str, nodes: int, node_index: int, hosts: Sequence[str], master_port: int,
                     ps: int = 1, run_id: str = "cloudtrain") -> Dict[str, str]:
    """What Azure ML injects into node ``node_index`` when each node runs one process (the inverse
    of ``detect``); used to emulate Azure ML on this machine."""
    env = {"AZUREML_RUN_ID": run_id, "AZ_BATCH_HOST_LIST": ",".join(hosts)}
    if distribution in ("mpi", "horovod"):
        env.update({"OMPI_COMM_WORLD_RANK": str(node_index), "OMPI_COMM_WORLD_SIZE": str(nodes),
                    "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
                    "OMPI_COMM_WORLD_NODE_RANK": "0"})
        if nodes > 1:
            env["AZ_BATCH_MASTER_NODE"] = "%s:%d" % (hosts[0], master_port)
        else:
            env["AZ_BATCHAI_MPI_MASTER_NODE"] = hosts[0]  # no port: the master port is 6105 then
        return env
    if distribution == "ps-worker":
        # Distinct ports, so that emulated nodes sharing one address do not collide.
        addrs = ["%s:%d" % (h, master_port + 2 + i) for i, h in enumerate(hosts)]
        task = {"type": "ps", "index": node_index} if node_index < ps else {"type": "worker", "index": node_index - ps}
        env["TF_CONFIG"] = json.dumps({"cluster": {"ps": addrs[:ps], "worker": addrs[ps:]}, "task": task,
                                       "environment": "cloud"}, sort_keys=True)
        return env
    # PyTorch distribution with one process per node (ddp, deepspeed; ray and none emulate it too).
    env.update({"MASTER_ADDR": hosts[0], "MASTER_PORT": str(master_port), "WORLD_SIZE": str(nodes),
                "NODE_RANK": str(node_index), "RANK": str(node_index), "LOCAL_RANK": "0"})
    return env


def emulate(job, node_index: int, cluster) -> Dict[str, str]:
    return node_environment(job.distribution.type, job.distribution.nodes, node_index, cluster.hosts,
                            cluster.master_port, ps=job.ps, run_id=job.name)


# After TI-ONE (whose nodes set none of MARKERS), before everything whose variables Azure's
# PyTorch, MPI and TensorFlow distributions also set.
PLATFORMS = (
    Platform(PLATFORM, detect, priority=80, environment=emulate, prefixes=("AZ_BATCH", "AZUREML_")),
)
