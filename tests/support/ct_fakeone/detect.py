"""The ``fakeone`` platform's node side (standard library only: it runs in the node)."""
from cloudtrain.launch.platform import Platform
from cloudtrain.launch.topology import Topology, env_int, split_hosts


def detect(environ):
    if "NODE_LIST" not in environ or "INDEX" not in environ:
        return None
    return Topology(
        platform="fakeone",
        node_rank=env_int(environ, "INDEX"),
        num_nodes=env_int(environ, "WORLD_SIZE") or len(split_hosts(environ["NODE_LIST"])),
        master_addr=environ["MASTER_ADDR"],
        master_port=env_int(environ, "MASTER_PORT"),
        hosts=split_hosts(environ["NODE_LIST"]),
        nproc_per_node=env_int(environ, "GPU_NUM_PER_NODE") or None,
    )


def environment(job, node_index, cluster):
    """What a fakeone node sees (TI-ONE's DDP variables)."""
    nodes = job.distribution.nodes
    gpus = job.resources.gpus_per_node
    return {
        "NODE_LIST": ",".join(f"{h}:{gpus}" for h in cluster.hosts),
        "INDEX": str(node_index),
        "MASTER_ADDR": cluster.hosts[0],
        "MASTER_PORT": str(cluster.master_port),
        "WORLD_SIZE": str(nodes),
        "RANK": str(node_index),
        "GPU_NUM": str(gpus * nodes),
        "GPU_NUM_PER_NODE": str(gpus),
    }


# It imitates TI-ONE exactly: detected only when named (--platform, CLOUDTRAIN_DETECTORS).
PLATFORMS = (Platform("fakeone", detect, priority=None, environment=environment,
                      variables=("NODE_LIST", "INDEX", "GPU_NUM", "GPU_NUM_PER_NODE")),)
