"""Did a job's collectives go over RDMA?  Read NCCL's ``NCCL_DEBUG=INFO`` log lines.

NCCL logs one line per channel and peer when a communicator connects, naming the transport:

    [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA   (RDMA, GPUDirect)
    NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1                     (RDMA, no GPUDirect)
    NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0                 (TCP: no RDMA)
    NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC                             (inside one node)

Inter-node channels are the ``via NET/<transport>/...`` ones.  ``Socket`` is TCP; every other
network transport (``IB``, ``IBext``/``IBext_v8`` -- the RDMA plugin of TI-ONE's HCC nodes --,
``AWS Libfabric`` / ``Libfabric`` / ``OFI`` for EFA) is RDMA; ``/GDRDMA`` says GPUDirect RDMA is
on (TI-ONE's guide: RDMA is active when the log shows ``via NET/IBext/.../GDRDMA``).
``NCCL INFO Using network <name>`` backs this up when no channel line was logged.

Pure functions over lines: works on any provider's logs (``cloudtrain logs --check-rdma``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional

_VIA_NET = re.compile(r"NCCL INFO Channel [0-9/]+\s*:.*?\bvia NET/(?P<transport>[^/\n]+?)/(?P<rest>\S*)")
_VIA_LOCAL = re.compile(r"NCCL INFO Channel [0-9/]+\s*:.*?\bvia (?P<path>(?:P2P|SHM|CollNet|NVLS)\S*)")
_USING_NETWORK = re.compile(r"NCCL INFO Using network (?P<name>.+?)\s*$")
_NO_IB = re.compile(r"NCCL INFO NET/IB\s*: No device found")
TCP = "Socket"
EVIDENCE = 5


@dataclass
class RdmaReport:
    """``used``: True (every inter-node channel over RDMA), False (TCP, or partly TCP), None (no
    evidence).  ``verdict`` is one of ``rdma``, ``rdma-no-gdr``, ``rdma-unconfirmed`` (only a
    "Using network IB" line), ``mixed``, ``socket``, ``intra-node``, ``unknown``."""

    verdict: str
    used: Optional[bool]
    channels: Dict[str, int] = field(default_factory=dict)  # transport -> inter-node channel lines
    gdr_channels: int = 0
    local_channels: int = 0
    networks: List[str] = field(default_factory=list)  # from "Using network X", in order of first sight
    evidence: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.used is True

    def summary(self) -> str:
        net = sum(self.channels.values())
        counts = ", ".join(f"{n} via {t}" for t, n in sorted(self.channels.items()))
        if self.verdict == "rdma":
            return f"RDMA: yes, GPUDirect RDMA on all {net} inter-node NCCL channels ({counts})"
        if self.verdict == "rdma-no-gdr":
            return (f"RDMA: yes, but without GPUDirect on {net - self.gdr_channels} of {net} inter-node channels "
                    f"({counts}); check NCCL_NET_GDR_LEVEL and the nvidia-peermem module")
        if self.verdict == "mixed":
            return (f"RDMA: partly; {self.channels.get(TCP, 0)} of {net} inter-node channels went over TCP "
                    f"sockets ({counts}); check NCCL_IB_HCA and the RDMA devices of every node")
        if self.verdict == "rdma-unconfirmed":
            return (f"RDMA: probably; NCCL chose network {self.networks[-1]}, but no channel line shows the "
                    "transport (nor GPUDirect); look for 'via NET/...' lines after the first collective")
        if self.verdict == "socket":
            where = f" ({counts})" if counts else f" (NCCL used network {self.networks[-1]})"
            return (f"RDMA: no, NCCL went over TCP sockets{where}; use RDMA-capable nodes (TI-ONE: >= 2 HCC "
                    "nodes x 8 GPUs) and an image with the user-space RDMA driver")
        if self.verdict == "intra-node":
            return (f"RDMA: not used, and not needed: all {self.local_channels} NCCL channels stay inside one "
                    "node (P2P/SHM)")
        return ("RDMA: unknown, no NCCL channel lines in the logs; run with NCCL_DEBUG=INFO (TI-ONE's RDMA preset "
                "sets it) and check again after the first collective")


def is_rdma(transport: str) -> bool:
    return transport.strip() != TCP


def analyse(lines: Iterable[str]) -> RdmaReport:
    channels: Dict[str, int] = {}
    gdr = local = 0
    networks: List[str] = []
    evidence: List[str] = []
    no_ib = None
    for raw in lines:
        line = raw.rstrip("\n")
        m = _VIA_NET.search(line)
        if m:
            transport = m.group("transport").strip()
            channels[transport] = channels.get(transport, 0) + 1
            if "GDRDMA" in m.group("rest"):
                gdr += 1
            if len(evidence) < EVIDENCE:
                evidence.append(line.strip())
            continue
        if _VIA_LOCAL.search(line):
            local += 1
            continue
        m = _USING_NETWORK.search(line)
        if m:
            if m.group("name") not in networks:
                networks.append(m.group("name"))
            continue
        if no_ib is None and _NO_IB.search(line):
            no_ib = line.strip()
    if no_ib and len(evidence) < EVIDENCE:
        evidence.append(no_ib)
    net = sum(channels.values())
    rdma = sum(n for t, n in channels.items() if is_rdma(t))
    if net:
        if rdma == net:
            verdict = "rdma" if gdr == net else "rdma-no-gdr"
            used: Optional[bool] = True
        elif rdma:
            verdict, used = "mixed", False
        else:
            verdict, used = "socket", False
    elif networks:
        used = is_rdma(networks[-1])
        verdict = "rdma-unconfirmed" if used else "socket"
        evidence = evidence or [f"NCCL INFO Using network {networks[-1]}"]
    elif local:
        verdict, used = "intra-node", None
    else:
        verdict, used = "unknown", None
    return RdmaReport(verdict, used, channels, gdr, local, networks, evidence)
