"""The ``fakeone`` platform's node detector (standard library only: it runs in the node)."""
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
