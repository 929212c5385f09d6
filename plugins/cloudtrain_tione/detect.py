"""TI-ONE's node environment -> the neutral ``Topology`` (as TI-ONE's distributed-training guide
lists it per training mode).

Standard library only, Python >= 3.8: ``cloudtrain launch`` imports this inside the training
image (it is shipped with the code, see ``cloudtrain.transfer.shipping``).

TI-ONE injects different variables per training mode; the mode is told apart from them:

- **Ray**: ``HEAD_ADDR``, ``HEAD_PORT`` (6379), ``RANK`` (0 = head);
- **PS-Worker**: ``TF_CONFIG`` (``cluster.ps``/``cluster.worker`` of ``host:2222``, ``task``);
- **MPI / Horovod**: ``NODE_IP_SLOT_LIST`` (``ip:slots,...``), ``OMPI_MCA_orte_default_hostfile``
  (``/etc/mpi/hostfile``, lines ``<host> slots=<n>``), ``GPU_NUM``, ``GPU_NUM_PER_NODE``;
- **DDP**: ``NODE_LIST`` (``host:gpus,...``), ``INDEX``, ``MASTER_ADDR``, ``MASTER_PORT``,
  ``WORLD_SIZE`` = the number of **nodes**, ``RANK`` = this **node's** index, ``GPU_NUM``,
  ``GPU_NUM_PER_NODE``.

``NODE_LIST`` and ``INDEX`` are the guide's "common variables of a training task": when they
are present in the other modes they give the node list and this node's index there too.
"""
from __future__ import annotations

import json
import re
import socket
from typing import Dict, List, Mapping, Optional, Tuple

from cloudtrain.launch.platform import Platform
from cloudtrain.launch.topology import DEFAULT_MASTER_PORT, Topology, env_int, split_hosts

PLATFORM = "tione"
# Set in the request's Envs by the tione provider (TI-ONE gives no port in these modes / no
# RDMA flag): the port of cloudtrain's liveness channel, and whether RDMAConfig was enabled.
PORT_VAR = "CLOUDTRAIN_MASTER_PORT"
RDMA_VAR = "CLOUDTRAIN_TIONE_RDMA"
# The job's node count, for Ray mode: the guide's Ray table gives HEAD_ADDR, HEAD_PORT and RANK
# only, so without NODE_LIST a node could not tell how many nodes the cluster has.
NODES_VAR = "CLOUDTRAIN_TIONE_NODES"
RAY_HEAD_PORT = 6379
PS_PORT = 2222
MPI_HOSTFILE = "/etc/mpi/hostfile"

# What TI-ONE presets on HCC types for multi-node RDMA training (the guide's RDMA section).
NCCL_PRESET = {
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_IB_SL": "3",
    "NCCL_CHECK_DISABLE": "1",
    "NCCL_P2P_DISABLE": "0",
    "NCCL_IB_DISABLE": "0",
    "NCCL_LL_THRESHOLD": "16384",
    "NCCL_IB_CUDA_SUPPORT": "1",
    "NCCL_IB_HCA": "mlx5_bond",
    "NCCL_NET_GDR_LEVEL": "2",
    "NCCL_IB_QPS_PER_CONNECTION": "4",
    "NCCL_IB_TC": "160",
    "NCCL_PXN_DISABLE": "1",
    "NCCL_IB_TIMEOUT": "24",
    "NCCL_DEBUG": "INFO",
    "NCCL_SOCKET_IFNAME": "eth0",
    "GLOO_SOCKET_IFNAME": "eth0",
    "TCCL_TOPO_AFFINITY": "4",
}

_TIONE_POD = re.compile(r"^train-\d+-")


def mode_of(environ: Mapping[str, str]) -> Optional[str]:
    """``ray``, ``ps-worker``, ``mpi``, ``ddp`` -- or None when this is not a TI-ONE node."""
    if environ.get("HEAD_ADDR") and environ.get("HEAD_PORT"):
        return "ray"
    config = _tf_config(environ)
    if config is not None:
        hosts = [a for role in ("ps", "worker") for a in config["cluster"].get(role, [])]
        # Kubeflow's TFJob injects the same shape: ask for TI-ONE's common list or pod names.
        if "NODE_LIST" in environ or (hosts and all(_TIONE_POD.match(h) for h in hosts)):
            return "ps-worker"
    if environ.get("NODE_IP_SLOT_LIST") or (environ.get("OMPI_MCA_orte_default_hostfile")
                                            and "GPU_NUM_PER_NODE" in environ):
        return "mpi"
    if environ.get("NODE_LIST") and environ.get("MASTER_ADDR") and ("RANK" in environ or "INDEX" in environ):
        return "ddp"
    return None


def detect(environ: Mapping[str, str]) -> Optional[Topology]:
    mode = mode_of(environ)
    if mode is None:
        return None
    topology = {"ray": _ray, "ps-worker": _ps_worker, "mpi": _mpi, "ddp": _ddp}[mode](environ)
    if environ.get(RDMA_VAR) == "1":
        topology.env.update(NCCL_PRESET)
    return topology


# -- per mode -------------------------------------------------------------------------------
def _gpus_per_node(environ: Mapping[str, str]) -> Optional[int]:
    return env_int(environ, "GPU_NUM_PER_NODE") or None


def _node_list(environ: Mapping[str, str]) -> List[str]:
    return split_hosts(environ.get("NODE_LIST", ""))


def _hosts_for(hosts: List[str], num_nodes: int) -> List[str]:
    return hosts if len(hosts) == num_nodes else []


def _ddp(environ: Mapping[str, str]) -> Topology:
    hosts = _node_list(environ)
    num_nodes = env_int(environ, "WORLD_SIZE") or len(hosts) or 1  # WORLD_SIZE counts nodes here
    return Topology(
        platform=PLATFORM,
        node_rank=env_int(environ, "RANK", "INDEX") or 0,  # RANK is the node's index here
        num_nodes=num_nodes,
        master_addr=environ["MASTER_ADDR"],
        master_port=env_int(environ, "MASTER_PORT") or DEFAULT_MASTER_PORT,
        hosts=_hosts_for(hosts, num_nodes),
        nproc_per_node=_gpus_per_node(environ),
    )


def parse_slot_list(value: str) -> List[Tuple[str, int]]:
    """``9.0.255.56:1,9.0.255.118:1`` -> ``[("9.0.255.56", 1), ("9.0.255.118", 1)]``."""
    out = []
    for item in value.replace(" ", ",").split(","):
        item = item.strip()
        if item:
            host, _, slots = item.rpartition(":")
            if not host or not slots.isdigit():
                raise ValueError("NODE_IP_SLOT_LIST item %r is not ip:slots" % item)
            out.append((host, int(slots)))
    return out


def parse_hostfile(text: str) -> List[Tuple[str, int]]:
    """Open MPI hostfile lines ``<host> slots=<n>`` (several pairs on one line are read too)."""
    out = []
    tokens = " ".join(line.split("#", 1)[0] for line in text.splitlines()).split()
    i = 0
    while i < len(tokens):
        host, slots = tokens[i], 1
        i += 1
        while i < len(tokens) and "=" in tokens[i]:
            key, _, value = tokens[i].partition("=")
            if key == "slots" and value.isdigit():
                slots = int(value)
            i += 1
        out.append((host, slots))
    return out


def _read_hostfile(path: str) -> List[Tuple[str, int]]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_hostfile(f.read())
    except OSError:
        return []


def _local_names() -> set:
    """This machine's host name (full and short) and address."""
    try:
        hostname = socket.gethostname()
    except OSError:
        return set()
    names = {hostname, hostname.split(".")[0]} - {""}
    try:
        names.add(socket.gethostbyname(hostname))
    except OSError:
        pass
    return names


def _short(name: str) -> str:
    return name.split(".")[0]


def _this_node(environ: Mapping[str, str], names: List[List[str]]) -> Optional[int]:
    """This node's index: ``INDEX``, else its host name or address in one of the lists."""
    index = env_int(environ, "INDEX")
    if index is not None:
        return index
    candidates = _local_names()
    for listing in names:
        for i, name in enumerate(listing):
            if name in candidates or _short(name) in candidates:
                return i
    if socket.gethostname().endswith("-launcher"):
        return 0
    return None


def _launcher_first(entries: List[Tuple[str, int]]) -> Optional[List[Tuple[str, int]]]:
    """The hostfile's entries with the Launcher's first (None when no entry is the Launcher).

    TI-ONE's distributed-training guide (its MPI and Horovod sections): MPI and Horovod jobs have
    a Launcher and Workers, the hostfile names them (``<task>-launcher slots=1 <task>-worker-0
    slots=1``), and in Horovod mode only the Launcher runs the start command.  So the Launcher is
    node 0, whatever the order of the list."""
    launchers = [i for i, (host, _) in enumerate(entries) if _short(host).endswith("-launcher")]
    if len(launchers) != 1:
        return None
    return [entries[launchers[0]]] + [e for i, e in enumerate(entries) if i != launchers[0]]


def _me_in(hosts: List[str], environ: Mapping[str, str]) -> Optional[int]:
    """This node's place in ``hosts`` (hostfile names): its own name from NODE_LIST[INDEX] (the
    common variables), else this machine's host name or address."""
    listed, index = _node_list(environ), env_int(environ, "INDEX")
    named = [{listed[index]}] if index is not None and 0 <= index < len(listed) else []
    for mine in named + [_local_names()]:
        shorts = {_short(m) for m in mine}
        for i, host in enumerate(hosts):
            if host in mine or _short(host) in shorts:
                return i
    if any(_short(name).endswith("-launcher") for name in _local_names()):
        return 0  # the Launcher pod, first in ``hosts``
    return None


def _mpi(environ: Mapping[str, str]) -> Topology:
    hostfile = environ.get("OMPI_MCA_orte_default_hostfile") or None
    from_file = _read_hostfile(hostfile) if hostfile else []
    ordered = _launcher_first(from_file)
    if ordered is not None:
        # Node 0 is the hostfile's Launcher entry, whatever INDEX or NODE_IP_SLOT_LIST's order say
        # (INDEX counts NODE_LIST, whose order need not be the IP list's).
        hosts = [h for h, _ in ordered]
        rank = _me_in(hosts, environ)
        entries = ordered
    else:
        entries = parse_slot_list(environ.get("NODE_IP_SLOT_LIST", "")) or from_file
        if not entries:
            raise ValueError("TI-ONE MPI mode without NODE_IP_SLOT_LIST and no readable hostfile (%s); "
                             "cannot tell where the nodes are" % (hostfile or MPI_HOSTFILE))
        hosts = [h for h, _ in entries]
        rank = _this_node(environ, [hosts, [h for h, _ in from_file]])
    if rank is None:
        raise ValueError("cannot tell which TI-ONE MPI node this is (no INDEX, and neither the host "
                         "name nor its address is in NODE_IP_SLOT_LIST or the hostfile)")
    slots = [n for _, n in entries]
    nproc = _gpus_per_node(environ) or (slots[0] if slots[0] > 0 and len(set(slots)) == 1 else None)
    return Topology(
        platform=PLATFORM,
        node_rank=rank,
        num_nodes=len(hosts),
        master_addr=hosts[0],
        master_port=env_int(environ, PORT_VAR) or DEFAULT_MASTER_PORT,
        hosts=hosts,
        nproc_per_node=nproc,
        hostfile=hostfile,
    )


def _tf_config(environ: Mapping[str, str]) -> Optional[dict]:
    raw = environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict) \
            or not isinstance(config.get("task"), dict):
        return None
    if not config["cluster"].get("ps") or not config["cluster"].get("worker"):
        return None
    return config


def _ps_worker(environ: Mapping[str, str]) -> Topology:
    config = _tf_config(environ)
    ps, workers = list(config["cluster"]["ps"]), list(config["cluster"]["worker"])
    addresses = ps + workers
    task = config["task"]
    kind, index = task.get("type"), int(task.get("index", 0))
    if kind not in ("ps", "worker"):
        raise ValueError("TF_CONFIG task type %r is neither ps nor worker" % kind)
    rank = index if kind == "ps" else len(ps) + index
    hosts = [a.rsplit(":", 1)[0] if a.count(":") == 1 else a for a in addresses]
    return Topology(
        platform=PLATFORM,
        node_rank=rank,
        num_nodes=len(addresses),
        master_addr=hosts[0],
        master_port=env_int(environ, PORT_VAR) or DEFAULT_MASTER_PORT,
        hosts=hosts,
        nproc_per_node=1,
        tf_config=config,
    )


def _ray(environ: Mapping[str, str]) -> Topology:
    head, port = environ["HEAD_ADDR"], env_int(environ, "HEAD_PORT") or RAY_HEAD_PORT
    rank = env_int(environ, "RANK", "INDEX") or 0
    hosts = _node_list(environ)
    # the Ray table gives no node count; NODE_LIST does when present, else the provider's Envs
    num_nodes = len(hosts) or env_int(environ, NODES_VAR) or rank + 1
    env: Dict[str, str] = {"RAY_ADDRESS": "%s:%d" % (head, port)}
    return Topology(
        platform=PLATFORM,
        node_rank=rank,
        num_nodes=num_nodes,
        master_addr=head,
        master_port=port,
        hosts=_hosts_for(hosts, num_nodes),
        nproc_per_node=_gpus_per_node(environ),
        env=env,
    )


# The one registration of the platform.  Most specific of all: TI-ONE's DDP, MPI and PS-Worker
# variables look like plain PyTorch's, an MPI operator's and Kubeflow TFJob's.
PLATFORMS = (
    Platform(PLATFORM, detect, priority=90, environment="cloudtrain_tione.render:emulate",
             variables=("NODE_LIST", "INDEX", "GPU_NUM", "GPU_NUM_PER_NODE", "NODE_IP_SLOT_LIST",
                        "HEAD_ADDR", "HEAD_PORT", RDMA_VAR)),
)
