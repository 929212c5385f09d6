"""Slurm's node environment -> the neutral ``Topology``.

Standard library only, Python >= 3.8: ``cloudtrain launch`` imports this on every node (it is
shipped with the code, see ``cloudtrain.transfer.shipping``).

The batch script (``cloudtrain_slurm.render``) runs one ``srun`` task per node, so every node's
launcher sees the step's variables (Slurm's sbatch(1) and srun(1) "OUTPUT ENVIRONMENT VARIABLES"):

- ``SLURM_JOB_ID``; ``SLURM_NODEID``: this node's index in the allocation (0 = the first node,
  where the batch script runs); ``SLURM_JOB_NUM_NODES`` (``SLURM_NNODES`` on old releases);
- ``SLURM_JOB_NODELIST``: the nodes in Slurm's compressed form (``gpu[01-04,07],login``),
  expanded here without calling out for every form Slurm prints (brackets with ranges, lists,
  zero padding, several bracket groups in one name); anything else is handed to
  ``scontrol show hostnames``, Slurm's own expander;
- ``SLURM_LAUNCH_NODE_IPADDR``: the address of the node the ``srun`` ran on.  The batch script
  runs on the allocation's first node and tells its name in ``CLOUDTRAIN_SLURM_BATCH_NODE``:
  when that is node 0, its address is the master's (torchrun's static rendezvous, Ray's head),
  so a node name that only Slurm resolves (``NodeAddr``) still works;
- ``SLURM_GPUS_ON_NODE``: the GPUs of this node (``--gpus-per-node``);
- ``SLURM_RESTART_COUNT``: how often Slurm requeued the job (``--requeue``): cloudtrain's
  ``CLOUDTRAIN_RESTART_COUNT``.
"""
from __future__ import annotations

import re
import subprocess
from typing import Dict, List, Mapping, Optional

from cloudtrain.launch.platform import Platform
from cloudtrain.launch.topology import DEFAULT_MASTER_PORT, Topology, env_int

PLATFORM = "slurm"
BATCH_NODE_VAR = "CLOUDTRAIN_SLURM_BATCH_NODE"
PORT_VAR = "CLOUDTRAIN_MASTER_PORT"
RESTART_VAR = "CLOUDTRAIN_RESTART_COUNT"
# Ports of two jobs that share a node must differ: the master port moves with the job id, in
# steps of two (the launcher uses the port and the one after it).
PORT_SPREAD = 500

_GROUP = re.compile(r"\[([^\[\]]*)\]")


def _split_top(value: str) -> List[str]:
    """``a[1-2],b,c[3,5]`` -> ``['a[1-2]', 'b', 'c[3,5]']``: commas outside brackets split."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(value):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ] in %r" % value)
        elif ch == "," and depth == 0:
            items.append(value[start:i])
            start = i + 1
    if depth:
        raise ValueError("unbalanced [ in %r" % value)
    items.append(value[start:])
    return [item.strip() for item in items if item.strip()]


def _range(text: str) -> List[str]:
    """``01-03`` -> ``['01', '02', '03']`` (the width of the first bound kept); ``7`` -> ``['7']``."""
    low, sep, high = text.partition("-")
    if not low.isdigit() or (sep and not high.isdigit()):
        raise ValueError("%r is not a number or a range of numbers" % text)
    if not sep:
        return [low]
    first, last = int(low), int(high)
    if last < first:
        raise ValueError("the range %r runs backwards" % text)
    return [str(n).zfill(len(low)) for n in range(first, last + 1)]


def _expand_one(name: str) -> List[str]:
    match = _GROUP.search(name)
    if match is None:
        if "[" in name or "]" in name:
            raise ValueError("unbalanced brackets in %r" % name)
        return [name]
    head, tail = name[:match.start()], name[match.end():]
    out = []
    for part in match.group(1).split(","):
        for value in _range(part.strip()):
            out += _expand_one(head + value + tail)
    return out


def expand_nodelist(value: str) -> List[str]:
    """Slurm's compressed host list expanded, in Slurm's order: ``a[1-3,5],b`` -> ``a1 a2 a3 a5
    b``; ``r[1-2]-n[01-02]`` -> ``r1-n01 r1-n02 r2-n01 r2-n02``.  Raises ``ValueError`` for what it cannot read."""
    hosts = []
    for item in _split_top(value.strip()):
        hosts += _expand_one(item)
    return hosts


def hostnames(value: str, run=subprocess.run) -> List[str]:
    """``expand_nodelist``, else Slurm's own ``scontrol show hostnames`` (one name a line)."""
    try:
        return expand_nodelist(value)
    except ValueError:
        done = run(["scontrol", "show", "hostnames", value], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, universal_newlines=True, check=True)
        return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def _gpus(environ: Mapping[str, str]) -> Optional[int]:
    gpus = env_int(environ, "SLURM_GPUS_ON_NODE")
    if gpus:
        return gpus
    visible = environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible and visible not in ("NoDevFiles", "-1"):
        return len([d for d in visible.split(",") if d.strip()])
    return None


def master_port(environ: Mapping[str, str]) -> int:
    """``CLOUDTRAIN_MASTER_PORT`` when the job sets one, else 29500 moved by the job id."""
    explicit = env_int(environ, PORT_VAR)
    if explicit:
        return explicit
    job = env_int(environ, "SLURM_JOB_ID") or 0
    return DEFAULT_MASTER_PORT + (job % PORT_SPREAD) * 2


def detect(environ: Mapping[str, str]) -> Optional[Topology]:
    if not environ.get("SLURM_JOB_ID") or "SLURM_NODEID" not in environ:
        return None
    num_nodes = env_int(environ, "SLURM_JOB_NUM_NODES", "SLURM_NNODES") or 1
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or ""
    hosts = hostnames(nodelist) if nodelist else []
    if len(hosts) != num_nodes:
        hosts = []
    rank = env_int(environ, "SLURM_NODEID") or 0
    master = hosts[0] if hosts else "127.0.0.1"
    launch_addr = environ.get("SLURM_LAUNCH_NODE_IPADDR", "").strip()
    if launch_addr and hosts and environ.get(BATCH_NODE_VAR) == hosts[0]:
        master = launch_addr  # the srun ran on node 0: its address, whatever its name resolves to
    env: Dict[str, str] = {RESTART_VAR: environ.get("SLURM_RESTART_COUNT", "").strip() or "0"}
    # mpirun inside an allocation starts its daemons through srun: a step beside the launcher's
    # own, which holds every node's CPUs (Slurm >= 20.11 gives a step none of another's without
    # --overlap).
    env["SLURM_OVERLAP"] = "1"
    # Open MPI inside an allocation takes its slots from Slurm (one task per node here: one slot),
    # so mpirun -H host:N refuses N > 1 ("not enough slots", Open MPI 4.1 on Slurm 22.05, seen on
    # the test cluster); without Slurm's allocator mpirun takes -H's slots and still starts its
    # daemons through srun.
    env["OMPI_MCA_ras"] = "^slurm"
    return Topology(
        platform=PLATFORM,
        node_rank=rank,
        num_nodes=num_nodes,
        master_addr=master,
        master_port=master_port(environ),
        hosts=hosts,
        nproc_per_node=_gpus(environ),
        env=env,
    )


PLATFORMS = (
    Platform(PLATFORM, detect, priority=55, environment="cloudtrain_slurm.render:emulate",
             prefixes=("SLURM_", "SLURMD_", "SBATCH_", "SRUN_"), variables=(BATCH_NODE_VAR,)),
)
