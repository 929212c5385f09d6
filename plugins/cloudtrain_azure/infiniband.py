"""Which Azure VM sizes have InfiniBand, and the NCCL/UCX settings cloudtrain applies on them.

The rule (Azure ML's distributed GPU training guide, "Accelerate GPU training with InfiniBand"):
only VM sizes with an ``r`` (RDMA) among the letters after the size number have the InfiniBand
hardware: ``Standard_NC24rs_v3`` has it, ``Standard_NC24s_v3`` (same cores, memory and GPUs) does not.
The old ``Standard_NC24r`` is RDMA-capable but lacks SR-IOV, which InfiniBand needs in Azure ML
images, so it does not count.  Pure functions, no SDK.
"""
from __future__ import annotations

import re
from typing import Dict, Optional

from cloudtrain.catalogs.catalog import Catalog, load, package_file
from cloudtrain.catalogs.instances import InstanceRules

# gpus_per_node without an accelerator: the first of these with exactly that many GPUs
# (1/2/4: NC A100 v4, 8: ND A100 v4), then T4 and V100 sizes.
DEFAULTS = ("A100", "A100-80GB", "T4", "V100")

# RDMA-capable sizes of the generation before SR-IOV: InfiniBand is not usable from Azure ML.
NO_SRIOV = {"standard_nc24r", "standard_h16r", "standard_h16mr", "standard_a8", "standard_a9"}
# The InfiniBand twin of a size without it, where Azure has one.
TWINS = {
    "standard_nc24s_v3": "Standard_NC24rs_v3",
    "standard_nc24s_v2": "Standard_NC24rs_v2",
    "standard_nc24": "Standard_NC24rs_v3",
    "standard_nc24r": "Standard_NC24rs_v3",
    "standard_nd24s": "Standard_ND24rs",
    "standard_nc96ads_a100_v4": "Standard_ND96asr_v4",
    "standard_nc48ads_a100_v4": "Standard_ND96asr_v4",
    "standard_nc24ads_a100_v4": "Standard_ND96asr_v4",
    "standard_nc40ads_h100_v5": "Standard_ND96isr_H100_v5",
    "standard_nc80adis_h100_v5": "Standard_ND96isr_H100_v5",
}
DEFAULT_SUGGESTION = "Standard_ND96asr_v4 (8x A100), Standard_ND96isr_H100_v5 (8x H100) or Standard_NC24rs_v3 (4x V100)"
_SIZE = re.compile(r"^(?:standard_|basic_)?[a-z]+\d+(?:-\d+)?([a-z]*)", re.I)

# What cloudtrain sets on InfiniBand sizes (never over the job's own env): Microsoft's settings for
# NCCL on the ND A100 v4 series ("Performance considerations for large scale deep learning training
# on Azure NDv4 (A100) series", Azure HPC blog, 2021-08-28), which the Azure HPC images also apply:
# IB relaxed ordering for NCCL and UCX, NCCL's socket traffic on eth0, and UCX_TLS=tcp (UCX, under
# Open MPI's UCX PML, carries MPI's own messages over TCP on eth0; NCCL still uses InfiniBand
# itself: NCCL_IB_DISABLE=0); a pure-MPI job that wants MPI on IB verbs sets UCX_TLS (e.g. rc) in its env.
# NCCL_TOPO_FILE is not set: Microsoft's topology files (/opt/microsoft/ndv4-topo.xml,
# ndv5-topo.xml) are files of the HPC *host* image (its /etc/nccl.conf points NCCL at them), not of
# a job's container, and NCCL warns about a path it cannot open; an image that ships one sets
# NCCL_TOPO_FILE in the job's env (docs/providers/azure.md).
IB_ENV = {
    "NCCL_IB_DISABLE": "0",
    "NCCL_IB_PCI_RELAXED_ORDERING": "1",
    "NCCL_SOCKET_IFNAME": "eth0",
    "UCX_TLS": "tcp",
    "UCX_NET_DEVICES": "eth0",
    "UCX_IB_PCI_RELAXED_ORDERING": "on",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
}
# network.rdma: off
NO_IB_ENV = {"NCCL_IB_DISABLE": "1", "UCX_TLS": "tcp,self,sm"}


def catalog() -> Catalog:
    """Azure ML's GPU VM sizes (``catalogs/azure.json``): InfiniBand is a fact of each row."""
    return load(package_file(__file__, "azure.json"))


def has_infiniband(size: str) -> bool:
    """``Standard_ND96asr_v4`` -> True, ``Standard_NC24s_v3`` -> False, ``Standard_NC24r`` -> False.
    The catalog's row when it has the size; the ``r`` rule for a size it does not list."""
    row = catalog().get(size)
    if row is not None:
        return row.infiniband
    key = size.strip().lower()
    if key in NO_SRIOV:
        return False
    match = _SIZE.match(key)
    return bool(match and "r" in match.group(1))


def suggestion(size: str) -> str:
    """An InfiniBand size to use instead of ``size``."""
    return TWINS.get(size.strip().lower(), DEFAULT_SUGGESTION)


def rdma_problem(size: str) -> Optional[str]:
    """Why ``network.rdma: on`` cannot work on ``size`` (with the fix), or None if it can."""
    if has_infiniband(size):
        return None
    why = ("is RDMA-capable but lacks the SR-IOV that InfiniBand needs in Azure ML"
           if size.strip().lower() in NO_SRIOV
           else "has no InfiniBand (only sizes with an 'r' after the size number, like NC24rs_v3, have it)")
    return (f"network.rdma is on, but VM size {size} {why}; use an InfiniBand size such as {suggestion(size)}, "
            "or set network.rdma: auto")


def rdma_env(rdma: str, size: Optional[str]) -> Dict[str, str]:
    """The NCCL/UCX variables for ``network.rdma`` on ``size`` (unknown size: none)."""
    if rdma == "off":
        return dict(NO_IB_ENV)
    if size and has_infiniband(size):
        return dict(IB_ENV)
    return {}


RULES = InstanceRules("azure", catalog, option="vm_size", owns=lambda n: n.lower().startswith("standard_"),
                      defaults=DEFAULTS, noun="VM size")
