"""The generic node environment: ``CLOUDTRAIN_*`` variables, or torchrun's ``PET_*`` ones.

Standard library only: ``cloudtrain launch`` imports this inside the training image.
"""
from __future__ import annotations

from typing import Mapping, Optional

from cloudtrain.launch.topology import DEFAULT_MASTER_PORT, Topology, env_int, split_hosts


def detect(environ: Mapping[str, str]) -> Optional[Topology]:
    if "CLOUDTRAIN_NUM_NODES" in environ:
        return _from(environ, "CLOUDTRAIN_", environ.get("CLOUDTRAIN_PLATFORM") or "local")
    if "PET_NNODES" in environ or "PET_NODE_RANK" in environ:
        return _from(environ, "PET_", "torchrun")
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


def environment(num_nodes: int, node_index: int, hosts, master_port: int,
                nproc_per_node: int, output_dir: Optional[str] = None, platform: str = "local") -> dict:
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
