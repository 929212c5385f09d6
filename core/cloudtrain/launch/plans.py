"""From a topology and the job's settings to the exact launcher command of this node.

Pure functions (no process is started here), so every launcher line is unit-tested.
Standard library only, Python >= 3.8.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .topology import Topology

DISTRIBUTIONS = ("ddp", "mpi", "horovod", "deepspeed", "ps-worker", "ray", "none")

# Variables mpirun forwards to every rank (-x NAME: the value never appears on the command line).
FORWARDED_ALWAYS = (
    "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONUNBUFFERED", "VIRTUAL_ENV",
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS",
    "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
    "IBV_FORK_SAFE",  # libibverbs: same as RDMAV_FORK_SAFE (rdma-core libibverbs/man/ibv_fork_init.3.md)
)
# RDMAV_: libibverbs' own settings (RDMAV_FORK_SAFE, RDMAV_HUGEPAGES_SAFE; EFA presets set the first),
# read in every rank that opens the device, so every rank must see them.
FORWARDED_PREFIXES = ("CLOUDTRAIN_", "NCCL_", "UCX_", "FI_", "HOROVOD_", "RDMAV_")
_PYTHON = re.compile(r"^(.*/)?python(\d(\.\d+)?)?$")


@dataclass
class Settings:
    """What the job says about launching, the same on every node."""

    distribution: str
    command: List[str]
    nproc_per_node: int = 1
    max_restarts: int = 0
    ps: int = 1
    job_id: str = "cloudtrain"
    iface: Optional[str] = None
    node_ip: str = "127.0.0.1"
    is_root: bool = False
    log_dir: Optional[str] = None
    env_names: List[str] = field(default_factory=list)
    min_nodes: Optional[int] = None
    python: str = "python3"
    mpi_major: Optional[int] = None  # Open MPI's major version on this node (None: unknown, 4's names)
    loopback: bool = False  # the master address is a loopback one: every node is on this machine
    # where the launcher's own files go when there is no log_dir: this user's private directory
    # (setup.private_dir), never a name in the shared temporary directory another user could make first
    scratch_dir: Optional[str] = None


@dataclass
class Plan:
    """What this node runs.

    ``mode``: ``exec`` (replace the launcher process), ``launcher`` (run ``argv`` on node 0 while
    the other nodes wait), ``wait`` (a non-launcher node: wait for node 0), ``ray-head`` /
    ``ray-worker`` (start Ray first, then the command / the wait).
    """

    mode: str
    argv: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    start: Optional[List[str]] = None
    wait_peers: bool = False
    files: Dict[str, str] = field(default_factory=dict)  # path -> content, written before running
    wait_ports: List[Tuple[str, int]] = field(default_factory=list)  # (host, port) open before running argv
    listen_host: str = ""  # where node 0's liveness server listens ("": every interface)

    def shell_line(self, topology: Topology) -> str:
        steps = []
        if self.start:
            steps.append(" ".join(shlex.quote(a) for a in self.start))
        if self.mode == "wait" or not self.argv:
            steps.append("# node %d waits for node 0 (%s:%d) to finish"
                         % (topology.node_rank, topology.master_addr, topology.master_port + 1))
        else:
            steps.append(" ".join(shlex.quote(a) for a in self.argv))
        return " && ".join(steps)


def _split_python(command: List[str]):
    """``python [-u] [-m mod | script] args`` -> (python, module?, rest); else None."""
    if not command or not _PYTHON.match(command[0]):
        return None
    rest = list(command[1:])
    while rest and rest[0] in ("-u", "-B", "-O", "-OO"):
        rest.pop(0)
    if rest and rest[0] == "-m" and len(rest) > 1:
        return command[0], True, rest[1:]
    if rest and not rest[0].startswith("-"):
        return command[0], False, rest
    return None


def _hosts_with_slots(topology: Topology, nproc: int) -> str:
    """``h0:2,h1:2``; nodes that share an address (local emulation) are merged."""
    slots = topology.slots or [nproc] * topology.num_nodes
    merged: Dict[str, int] = {}
    for host, n in zip(topology.hosts, slots):
        merged[host] = merged.get(host, 0) + n
    return ",".join("%s:%d" % (h, n) for h, n in merged.items())


def forwarded_names(environ, settings: Settings) -> List[str]:
    names = set(n for n in FORWARDED_ALWAYS if n in environ)
    names.update(n for n in environ if n.startswith(FORWARDED_PREFIXES))
    names.discard("CLOUDTRAIN_NODE_RANK")  # differs per node; ranks learn theirs from MPI
    names.update(n for n in settings.env_names if n in environ)
    return sorted(names)


def elastic(topology: Topology, s: Settings) -> bool:
    """Restarts or a node range need every node to (re-)rendezvous: c10d, not static."""
    return s.max_restarts > 0 or (s.min_nodes is not None and s.min_nodes < topology.num_nodes)


# torch >= 2.4 shares the agents' c10d store with the workers, set up in the first round only: a
# node that joins a later round (a pod the platform re-created) waits for the first round's
# MASTER_ADDR key under the new round's prefix, which nobody writes (torch/distributed/elastic/
# rendezvous/dynamic_rendezvous.py, next_rendezvous); and a later attempt's workers read the
# earlier attempt's keys.  Not shared, every round gets its own store (RendezvousStoreInfo.build).
UNSHARED_STORE = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def torchrun(topology: Topology, s: Settings) -> List[str]:
    split = _split_python(s.command)
    argv = [split[0], "-m", "torch.distributed.run"] if split else ["torchrun"]
    c10d = elastic(topology, s)
    nnodes = str(topology.num_nodes) if not c10d or s.min_nodes is None else "%d:%d" % (s.min_nodes, topology.num_nodes)
    argv += ["--nnodes", nnodes, "--nproc-per-node", str(s.nproc_per_node)]
    if c10d:
        argv += ["--rdzv-backend", "c10d",
                 "--rdzv-endpoint", "%s:%d" % (topology.master_addr, topology.master_port),
                 "--rdzv-id", s.job_id, "--max-restarts", str(s.max_restarts)]
        if s.loopback:  # each round's store on this node's address, not the machine's name's
            argv += ["--local-addr", s.node_ip]
    else:
        # Static rendezvous: no polling, the node rank is known (c10d cost ~15% of a short job).
        argv += ["--node-rank", str(topology.node_rank), "--master-addr", topology.master_addr,
                 "--master-port", str(topology.master_port)]
    argv += ["--tee", "3"]
    if s.log_dir:
        argv += ["--log-dir", os.path.join(s.log_dir, "torchrun")]
    if split:
        return argv + (["-m"] if split[1] else []) + split[2]
    return argv + ["--no-python"] + s.command


SSH_WAIT = "CLOUDTRAIN_WAIT_SSH"


def ssh_ports(topology: Topology, environ) -> List[Tuple[str, int]]:
    """``(host, sshd port)`` of every node mpirun must reach before it starts, when the platform
    may start node 0 before the others' sshd is up (``$CLOUDTRAIN_WAIT_SSH`` = the port)."""
    port = environ.get(SSH_WAIT, "").strip()
    if not port.isdigit():
        return []
    return [(host, int(port)) for host in dict.fromkeys(topology.hosts)]


def rdma_network(environ) -> bool:
    """Is this node's fast network (InfiniBand/RoCE, EFA) on?  ``CLOUDTRAIN_RDMA`` (``1``/``0``)
    says so explicitly; else the presets providers set for ``network.rdma``: libfabric's EFA
    provider (``FI_PROVIDER=efa``) or NCCL's InfiniBand (``NCCL_IB_DISABLE=0``)."""
    explicit = environ.get("CLOUDTRAIN_RDMA", "").strip().lower()
    if explicit:
        return explicit in ("1", "on", "true", "yes")
    return environ.get("FI_PROVIDER") == "efa" or environ.get("NCCL_IB_DISABLE") == "0"


def daemons_share_a_host(topology: Topology, s: Settings) -> bool:
    """Several of mpirun's nodes are one machine under different names (every node on loopback,
    but not one address: Slurm's test nodes ``n1``/``n2`` both on 127.0.0.1), so each has its own
    Open MPI daemon on the same host.  The shared-memory BTL names its backing file after the
    host name, the job and the rank's local rank (Open MPI 4.1.4's mca_btl_vader.so:
    ``%s/vader_segment.%s.%u.%x.%d`` under ``btl_vader_backing_directory``, /dev/shm): local rank 0
    of each node opens the same file, and the ranks crash in their first collective
    (``MPI_Comm_dup``: SIGSEGV in ``mca_btl_vader_poll_handle_frag``, seen on the test cluster).
    Nodes that share one address are merged into one ``-H`` entry (one daemon) and keep it."""
    return s.loopback and len(set(topology.hosts)) > 1


def mpi_transport(s: Settings, environ, shared_host: bool = False) -> List[str]:
    """mpirun's transport options.  Over RDMA, none: Open MPI picks its fastest transport itself
    (UCX on InfiniBand/RoCE, libfabric on EFA; "OMPI will use the best BTL available").  Else
    TCP, forced, with the shared-memory BTL under its name: ``vader`` up to 4.1, ``sm`` since 5.0,
    unless several daemons share the host (``daemons_share_a_host``): then TCP alone."""
    if rdma_network(environ):
        return []
    if shared_host:
        return ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp"]
    shared = "sm" if (s.mpi_major or 4) >= 5 else "vader"
    return ["--mca", "pml", "ob1", "--mca", "btl", "self,%s,tcp" % shared]


def mpi_version(text: str) -> Optional[int]:
    """``mpirun (Open MPI) 5.0.3`` -> 5; None for another MPI or no output."""
    match = re.search(r"\(Open MPI\)\s+(\d+)\.", text or "")
    return int(match.group(1)) if match else None


# Open MPI's rsh launcher starts each remote daemon through ssh with every MCA setting mpirun
# has, from its environment (OMPI_MCA_*, PRRTE's PRTE_MCA_*, PMIx's PMIX_MCA_*) and from its
# ``--mca``/``--prtemca`` words, on the remote command line, each value inside double quotes
# (Open MPI 4.1: ``orted ... -mca btl_tcp_if_exclude "VALUE"``, seen in the ssh command
# tests/security/test_mpi_remote_shell.py records).  There a ``$``, a backtick, a ``"`` or a
# ``\`` is the remote shell's (``$(...)`` runs on the node), and csh reads ``!``; a newline ends the
# command.  Such a value is refused before mpirun starts: no MCA setting needs one.
MCA_PREFIXES = ("OMPI_MCA_", "PRTE_MCA_", "PMIX_MCA_")
MCA_OPTIONS = ("--mca", "-mca", "--prtemca", "--pmixmca", "--gmca", "-gmca")
REMOTE_SHELL_CHARACTERS = set("$`\"\\!\n\r")


def mca_problems(environ, argv: List[str]) -> List[str]:
    """The MCA settings (environment and ``argv``) that the rsh launcher would hand a remote shell
    with a character that shell interprets inside double quotes."""
    settings = [(name, value) for name, value in environ.items() if name.startswith(MCA_PREFIXES)]
    settings += [("%s %s" % (argv[i], argv[i + 1]), argv[i + 2]) for i in range(len(argv) - 2)
                 if argv[i] in MCA_OPTIONS]
    return ["%s=%r" % (name, value) for name, value in sorted(settings)
            if REMOTE_SHELL_CHARACTERS.intersection(value)]


def check_mca(environ, argv: List[str]) -> None:
    problems = mca_problems(environ, argv)
    if problems:
        raise ValueError("%s: Open MPI passes MCA settings to the other nodes' shells inside double quotes, where "
                         "$ ` \" \\ ! and line breaks are code; remove those characters from the value"
                         % "; ".join(problems))


def mpirun(topology: Topology, s: Settings, environ) -> List[str]:
    total = sum(topology.slots) if topology.slots else s.nproc_per_node * topology.num_nodes
    argv = ["mpirun"]
    if s.is_root:
        argv.append("--allow-run-as-root")
    argv += ["-np", str(total), "-H", _hosts_with_slots(topology, s.nproc_per_node),
             "--bind-to", "none", "--map-by", "slot", "--tag-output"]
    if s.iface:
        # Open MPI 5 moved the runtime (ORTE) to PRRTE: its out-of-band channel is PRRTE's setting
        oob = "--prtemca" if (s.mpi_major or 4) >= 5 else "--mca"
        argv += ["--mca", "btl_tcp_if_include", s.iface, oob, "oob_tcp_if_include", s.iface]
    argv += mpi_transport(s, environ, daemons_share_a_host(topology, s))
    for name in forwarded_names(environ, s):
        argv += ["-x", name]
    return argv + rank_shim(s) + s.command


def rank_shim(s: Settings) -> List[str]:
    """Every rank goes through ``cloudtrain.launch.mpirank``: PyTorch's variables from MPI's."""
    return [s.python, "-m", "cloudtrain.launch.mpirank", "--"]


def horovodrun(topology: Topology, s: Settings) -> List[str]:
    total = sum(topology.slots) if topology.slots else s.nproc_per_node * topology.num_nodes
    argv = ["horovodrun", "-np", str(total), "-H", _hosts_with_slots(topology, s.nproc_per_node)]
    if s.iface:
        argv += ["--network-interface", s.iface]
    return argv + rank_shim(s) + s.command


def deepspeed_hostfile(topology: Topology, s: Settings) -> str:
    """DeepSpeed's hostfile: one ``name slots=N`` line per node, in node-rank order.  With
    ``--no_ssh`` the names are labels only; DeepSpeed refuses duplicates, so nodes sharing an
    address (local emulation) are named ``node<i>``."""
    names = topology.hosts if len(set(topology.hosts)) == topology.num_nodes else \
        ["node%d" % i for i in range(topology.num_nodes)]
    slots = topology.slots or [s.nproc_per_node] * topology.num_nodes
    return "".join("%s slots=%d\n" % (n, k) for n, k in zip(names, slots))


def deepspeed(topology: Topology, s: Settings, hostfile: Optional[str] = None) -> List[str]:
    # --no_local_rank: scripts read LOCAL_RANK from the environment, as under torchrun.
    argv = ["deepspeed", "--no_local_rank"]
    if topology.num_nodes > 1:
        # Every node starts its own ranks (no pdsh/ssh between nodes), like torchrun; DeepSpeed
        # still wants a hostfile to count the nodes and their slots.
        argv += ["--no_ssh", "--hostfile", hostfile or "hostfile", "--node_rank", str(topology.node_rank),
                 "--num_nodes", str(topology.num_nodes), "--master_addr", topology.master_addr]
    argv += ["--num_gpus", str(s.nproc_per_node), "--master_port", str(topology.master_port)]
    split = _split_python(s.command)
    if split:
        return argv + (["--module"] if split[1] else []) + split[2]
    return argv + ["--no_python"] + s.command


def tf_config(topology: Topology, ps: int) -> dict:
    """The node's TF_CONFIG: the platform's own, or derived (first ``ps`` nodes are PS)."""
    if topology.tf_config:
        return topology.tf_config
    if not 1 <= ps < topology.num_nodes:
        raise ValueError("ps-worker needs 1 <= ps < nodes, got ps=%d with %d nodes" % (ps, topology.num_nodes))
    # Distinct ports per task so that emulated nodes sharing one address do not collide.
    addrs = ["%s:%d" % (h, topology.master_port + 2 + i) for i, h in enumerate(topology.hosts)]
    rank = topology.node_rank
    task = {"type": "ps", "index": rank} if rank < ps else {"type": "worker", "index": rank - ps}
    return {"cluster": {"ps": addrs[:ps], "worker": addrs[ps:]}, "task": task, "environment": "cloud"}


def ray_addresses(topology: Topology, s: Settings):
    """(this node's Ray IP, the head's GCS address).

    Ray rewrites 127.0.0.1 to the machine's own address, so emulated nodes on loopback get
    distinct addresses of their own from 127.0.0.0/8 (node r -> 127.0.0.<r+2>).
    """
    if s.node_ip.startswith("127."):
        return "127.0.0.%d" % (2 + topology.node_rank), "127.0.0.2:%d" % topology.master_port
    return s.node_ip, "%s:%d" % (topology.master_addr, topology.master_port)


def ray_start(topology: Topology, s: Settings, head: bool) -> List[str]:
    node_ip, address = ray_addresses(topology, s)
    resources = json.dumps({"Rank:%d" % topology.node_rank: 1})
    argv = ["ray", "start", "--node-ip-address", node_ip, "--resources", resources, "--disable-usage-stats"]
    if head:
        argv += ["--head", "--port", str(topology.master_port), "--include-dashboard", "false"]
    else:
        argv += ["--address", address]
    return argv


def common_env(topology: Topology, s: Settings) -> Dict[str, str]:
    env = {
        "CLOUDTRAIN_PLATFORM": topology.platform,
        "CLOUDTRAIN_DISTRIBUTION": s.distribution,
        "CLOUDTRAIN_NODE_RANK": str(topology.node_rank),
        "CLOUDTRAIN_NUM_NODES": str(topology.num_nodes),
        "CLOUDTRAIN_NPROC_PER_NODE": str(s.nproc_per_node),
        "CLOUDTRAIN_MASTER_ADDR": topology.master_addr,
        "CLOUDTRAIN_MASTER_PORT": str(topology.master_port),
        "CLOUDTRAIN_HOSTS": ",".join(topology.hosts),
        "CLOUDTRAIN_OUTPUT_DIR": topology.output_dir or os.path.abspath("output"),
    }
    return env


def final_environment(plan_env: Dict[str, str], topology: Topology, s: Settings, environ) -> Dict[str, str]:
    """The node's environment: the platform's, its implied presets, then the plan's."""
    env = dict(environ)
    if s.distribution in ("ddp", "deepspeed"):
        # torchrun reads PET_<OPTION> as the default of every option (Kubeflow's operator sets
        # PET_RDZV_BACKEND, PET_MAX_RESTARTS, ...): the launcher's explicit arguments must rule.
        env = {k: v for k, v in env.items() if not k.startswith("PET_")}
    for key, value in topology.env.items():
        env.setdefault(key, value)
    env.update(plan_env)
    if s.distribution not in ("mpi", "horovod"):  # mpirun tags every write: keep lines whole
        env.setdefault("PYTHONUNBUFFERED", "1")
    if s.iface:
        env.setdefault("GLOO_SOCKET_IFNAME", s.iface)
        env.setdefault("TP_SOCKET_IFNAME", s.iface)
    return env


LOOPBACK = "127.0.0.1"


def launcher_dir(s: Settings) -> str:
    """Where the files the launcher makes go: the run's own directory (``log_dir``), else this
    user's private directory (``scratch_dir``, made and checked by ``main``; see ``setup.private_dir``)."""
    if s.log_dir:
        return s.log_dir
    if s.scratch_dir:
        return s.scratch_dir
    from .setup import private_dir_path
    return private_dir_path()


STACKS_SIGNAL = "SIGUSR2"  # loopback_site's faulthandler signal (cloudtrain.runtime.stacks sends it)


def site_dir(topology: Topology, s: Settings) -> str:
    """Where a loopback job's ``sitecustomize`` (``loopback_site``) is written: it is first on the
    ranks' ``PYTHONPATH``, so only ever in a directory of this user's."""
    if s.log_dir:
        return os.path.join(s.log_dir, "site")
    return os.path.join(launcher_dir(s), "%s-node%d-site" % (s.job_id, topology.node_rank))


def loopback_env(topology: Topology, s: Settings, environ) -> Dict[str, str]:
    """Every node on this machine: the job's Python processes load ``loopback_site`` (PyTorch's
    store on the master address only); gloo and TensorPipe use ``lo`` (``s.iface``)."""
    path = [site_dir(topology, s)] + [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    # the site arms faulthandler on this signal in every rank: `cloudtrain stacks` without py-spy
    return {"PYTHONPATH": os.pathsep.join(path), "CLOUDTRAIN_STACKS_SIGNAL": STACKS_SIGNAL}


def plan(topology: Topology, s: Settings, environ) -> Plan:
    """The plan for this node.  Raises ValueError for a request that cannot work.  When every
    node is on this machine (``s.loopback``), nothing it starts listens beyond loopback where
    the framework can be told: see ``loopback_env``; the liveness server binds 127.0.0.1."""
    result = _plan(topology, s, environ)
    if s.loopback:
        from . import loopback_site
        with open(loopback_site.__file__, encoding="utf-8") as f:
            result.files[os.path.join(site_dir(topology, s), "sitecustomize.py")] = f.read()
        result.listen_host = LOOPBACK
    return result


def _plan(topology: Topology, s: Settings, environ) -> Plan:
    if s.distribution not in DISTRIBUTIONS:
        raise ValueError("unknown distribution type %r; use one of: %s" % (s.distribution, ", ".join(DISTRIBUTIONS)))
    if not s.command:
        raise ValueError("no command given; put it after --, e.g. cloudtrain launch -- python train.py")
    if topology.num_nodes > 1 and not topology.hosts and s.distribution in ("mpi", "horovod", "ps-worker"):
        raise ValueError("the platform did not say where the other nodes are (no host list); "
                         "%s needs one: set CLOUDTRAIN_HOSTS" % s.distribution)
    env = common_env(topology, s)
    if s.loopback:
        env.update(loopback_env(topology, s, environ))
    single = {"RANK": str(topology.node_rank), "WORLD_SIZE": str(topology.num_nodes),
              "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
              "MASTER_ADDR": topology.master_addr, "MASTER_PORT": str(topology.master_port)}
    d = s.distribution
    if d == "ddp":
        if elastic(topology, s):
            env.update(UNSHARED_STORE)
        return Plan("exec", torchrun(topology, s), env)
    if d == "deepspeed":
        if topology.num_nodes == 1:
            return Plan("exec", deepspeed(topology, s), env)
        path = os.path.join(launcher_dir(s), "%s-node%d.hostfile" % (s.job_id, topology.node_rank))
        return Plan("exec", deepspeed(topology, s, path), env, files={path: deepspeed_hostfile(topology, s)})
    if d in ("mpi", "horovod"):
        if not topology.is_master:
            return Plan("wait", [], env)
        final = final_environment(env, topology, s, environ)
        argv = mpirun(topology, s, final) if d == "mpi" else horovodrun(topology, s)
        if topology.num_nodes > 1:  # (one node: no remote shell)
            check_mca(final, argv)
        return Plan("launcher" if topology.num_nodes > 1 else "exec", argv, env,
                    wait_ports=ssh_ports(topology, environ))
    if d == "ray":
        env["RAY_ADDRESS"] = ray_addresses(topology, s)[1]
        if topology.is_master:
            return Plan("ray-head", list(s.command), env, start=ray_start(topology, s, head=True),
                        wait_peers=topology.num_nodes > 1)
        return Plan("ray-worker", [], env, start=ray_start(topology, s, head=False))
    if d == "ps-worker":
        config = tf_config(topology, s.ps)
        env.update(single)
        env["TF_CONFIG"] = json.dumps(config, sort_keys=True)
        env["CLOUDTRAIN_ROLE"] = config["task"]["type"]
        env["CLOUDTRAIN_ROLE_INDEX"] = str(config["task"]["index"])
        return Plan("exec", list(s.command), env)
    env.update(single)
    return Plan("exec", list(s.command), env)
