"""The neutral node topology that every platform's environment resolves to.

Standard library only, Python >= 3.8: this module runs inside the training image.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Mapping, Optional

DEFAULT_MASTER_PORT = 29500


@dataclass
class Topology:
    """Where this node stands in the job, whatever the platform called things.

    ``hosts`` lists every node's address in node-rank order (``hosts[0]`` is the master);
    ``nproc_per_node`` is ``None`` when the platform does not say (the launcher then uses
    ``--nproc-per-node`` or 1).  ``tf_config`` is the platform's own ``TF_CONFIG`` when it
    injected one.  ``env`` holds variables the platform implies but did not set (e.g. NCCL
    presets) and is exported without overriding what is already set.  ``failure_file``: where
    the platform reads a failed node's one-line reason (the platform's detector says; None: nowhere).
    """

    platform: str
    node_rank: int = 0
    num_nodes: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_MASTER_PORT
    hosts: List[str] = field(default_factory=list)
    nproc_per_node: Optional[int] = None
    slots: Optional[List[int]] = None
    output_dir: Optional[str] = None
    tf_config: Optional[dict] = None
    hostfile: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    failure_file: Optional[str] = None

    def __post_init__(self) -> None:
        if self.num_nodes < 1:
            raise ValueError("num_nodes must be >= 1, got %d" % self.num_nodes)
        if not 0 <= self.node_rank < self.num_nodes:
            raise ValueError("node_rank %d is outside 0..%d" % (self.node_rank, self.num_nodes - 1))
        if not self.hosts:
            self.hosts = [self.master_addr] * self.num_nodes if self.num_nodes == 1 else []
        if self.hosts and len(self.hosts) != self.num_nodes:
            raise ValueError("%d hosts listed for %d nodes" % (len(self.hosts), self.num_nodes))

    @property
    def is_master(self) -> bool:
        return self.node_rank == 0

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def env_int(environ: Mapping[str, str], *names: str) -> Optional[int]:
    """The first of ``names`` that is set to an integer, else None."""
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                raise ValueError("%s=%r is not an integer" % (name, value))
    return None


def split_hosts(value: str) -> List[str]:
    """``a:1,b:1`` or ``a b`` or ``a,b`` -> ``['a', 'b']`` (slot suffixes dropped)."""
    hosts = []
    for item in value.replace(" ", ",").split(","):
        item = item.strip()
        if item:
            hosts.append(item.rsplit(":", 1)[0] if item.count(":") == 1 else item)
    return hosts
