"""The generic platform, tried last: ``CLOUDTRAIN_*``, torchrun's ``PET_*``, or plain PyTorch.

Standard library only: ``cloudtrain launch`` imports this inside the training image.

- ``CLOUDTRAIN_NUM_NODES`` set: cloudtrain's own variables (a provider that emulates nothing,
  or an outer ``cloudtrain launch``); the platform is ``$CLOUDTRAIN_PLATFORM``, default ``local``.
- ``PET_NNODES`` or ``PET_NODE_RANK`` set: torchrun's (platform ``torchrun``).
- ``MASTER_ADDR`` with ``WORLD_SIZE`` and ``RANK`` (no ``PET_*``): the plain PyTorch
  environment that older Kubeflow operators and many schedulers set, one member per node
  (platform ``pytorch``).  ``WORLD_SIZE`` and ``RANK`` count **nodes** there, since the
  launcher is started once per node; if ``LOCAL_WORLD_SIZE`` is set too, this process was
  itself started per process (by torchrun), so they count **processes**: the node count is
  ``WORLD_SIZE / LOCAL_WORLD_SIZE`` and the node rank ``GROUP_RANK`` (else
  ``RANK // LOCAL_WORLD_SIZE``).
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional

from .topology import DEFAULT_MASTER_PORT, Topology, env_int, split_hosts


def detect(environ: Mapping[str, str]) -> Optional[Topology]:
    if "CLOUDTRAIN_NUM_NODES" in environ:
        return _from(environ, "CLOUDTRAIN_", environ.get("CLOUDTRAIN_PLATFORM") or "local")
    if "PET_NNODES" in environ or "PET_NODE_RANK" in environ:
        return _from(environ, "PET_", "torchrun")
    if environ.get("MASTER_ADDR") and "WORLD_SIZE" in environ and "RANK" in environ:
        return _pytorch(environ)
    return None


def _from(environ: Mapping[str, str], prefix: str, platform: str) -> Topology:
    nnodes = environ.get(prefix + "NUM_NODES", environ.get(prefix + "NNODES", "1"))
    num_nodes = int(nnodes.split(":")[-1])  # torchrun allows MIN:MAX
    master = environ.get(prefix + "MASTER_ADDR") or environ.get("MASTER_ADDR") or "127.0.0.1"
    hosts = split_hosts(environ.get(prefix + "HOSTS", ""))
    if not hosts and num_nodes == 1:
        hosts = [master]
    return Topology(
        platform=platform,
        node_rank=env_int(environ, prefix + "NODE_RANK") or 0,
        num_nodes=num_nodes,
        master_addr=master,
        master_port=env_int(environ, prefix + "MASTER_PORT", "MASTER_PORT") or DEFAULT_MASTER_PORT,
        hosts=hosts,
        nproc_per_node=env_int(environ, prefix + "NPROC_PER_NODE"),
        output_dir=environ.get("CLOUDTRAIN_OUTPUT_DIR") or None,
    )


def _pytorch(environ: Mapping[str, str]) -> Topology:
    world, rank = env_int(environ, "WORLD_SIZE") or 1, env_int(environ, "RANK") or 0
    per_node = env_int(environ, "LOCAL_WORLD_SIZE")
    if per_node:  # counted in processes
        nodes = max(world // per_node, 1)
        node_rank = env_int(environ, "GROUP_RANK")
        node_rank = rank // per_node if node_rank is None else node_rank
    else:  # counted in nodes
        nodes, node_rank = world, rank
    return Topology(
        platform="pytorch",
        node_rank=node_rank,
        num_nodes=nodes,
        master_addr=environ["MASTER_ADDR"],
        master_port=env_int(environ, "MASTER_PORT") or DEFAULT_MASTER_PORT,
        nproc_per_node=per_node,
        output_dir=environ.get("CLOUDTRAIN_OUTPUT_DIR") or None,
    )


def node_environment(num_nodes: int, node_index: int, hosts, master_port: int, nproc_per_node: int,
                     output_dir: Optional[str] = None, platform: str = "local") -> Dict[str, str]:
    """What the generic platform injects into node ``node_index`` (inverse of ``detect``)."""
    env = {
        "CLOUDTRAIN_PLATFORM": platform,
        "CLOUDTRAIN_NUM_NODES": str(num_nodes),
        "CLOUDTRAIN_NODE_RANK": str(node_index),
        "CLOUDTRAIN_MASTER_ADDR": hosts[0],
        "CLOUDTRAIN_MASTER_PORT": str(master_port),
        "CLOUDTRAIN_HOSTS": ",".join(hosts),
        "CLOUDTRAIN_NPROC_PER_NODE": str(nproc_per_node),
    }
    if output_dir:
        env["CLOUDTRAIN_OUTPUT_DIR"] = output_dir
    return env


def environment(job, node_index: int, cluster) -> Dict[str, str]:
    return node_environment(job.distribution.nodes, node_index, list(cluster.hosts), cluster.master_port,
                            job.procs_per_node, cluster.output_dir)


# What launchers and MPI set in every process, whatever the platform: the generic platform's
# variables (``cloudtrain.launch.platform.generic`` makes the ``Platform`` of this module).
PREFIXES = ("CLOUDTRAIN_", "PET_", "TORCHELASTIC_", "OMPI_", "PMIX_")
VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
             "MASTER_ADDR", "MASTER_PORT", "TF_CONFIG", "RAY_ADDRESS", "NNODES")
