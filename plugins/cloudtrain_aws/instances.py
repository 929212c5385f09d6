"""The AWS providers' instance catalogs (``catalogs/ec2.json``, ``catalogs/sagemaker.json``, made by
``cloudtrain_aws.catalog_refresh``) and the EFA presets an instance's row calls for.

``gpus_per_node`` without ``accelerator`` picks, in this order, the first of ``DEFAULTS`` that
has an instance with exactly that many GPUs (the smallest such): A10G (g5), then L4 (g6), T4
(g4dn), L40S (g6e), A100 (p4d), H100 (p5).  EKS has no default: without an accelerator or an
instance type, pods ask for GPUs and the cluster's scheduler places them.
"""
from __future__ import annotations

import os
import re
from typing import Dict, Optional

from cloudtrain.catalogs.catalog import Catalog, Instance, load, package_file
from cloudtrain.catalogs.instances import InstanceRules

# EFA presets for libfabric / NCCL on EFA instances (SageMaker's and the AWS DLAMI's choices;
# libfabric >= 1.18 turns on device RDMA by itself where the instance has it).  A job's own env wins.
# NCCL_PROTO=simple: EFA delivers data out of order, which NCCL's LL and LL128 protocols cannot take
# (silent corruption): aws/aws-ofi-nccl issue #76; newer aws-ofi-nccl sets it itself (platform-aws.c),
# older ones in older images do not, so SageMaker's own launchers set it: sagemaker-training-toolkit
# PR #196 (smdistributed and torch_distributed), and the SageMaker SDK's torchrun driver
# (aws/sagemaker-python-sdk, container_drivers/distributed_drivers/torchrun_driver.py, setup_env()).
NCCL_ON_EFA = {"NCCL_PROTO": "simple"}
EFA_ENV = {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1", "RDMAV_FORK_SAFE": "1", **NCCL_ON_EFA}
DEFAULTS = ("A10G", "L4", "T4", "L40S", "A100", "H100")
EC2_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
# libfabric's EFA provider: use the device's RDMA read.  Only where the catalog says the device
# has it: on g4dn/g5/p3dn libfabric aborts ("EFA device has no rdma-read capability").
DEVICE_RDMA = {"FI_EFA_USE_DEVICE_RDMA": "1"}


def ec2_catalog() -> Catalog:
    return load(package_file(__file__, "ec2.json"))


def sagemaker_catalog() -> Catalog:
    return load(package_file(__file__, "sagemaker.json"))


def job_region(provider: str):
    """The job's region as known without an SDK call: ``providers.<provider>.region``, else
    ``AWS_DEFAULT_REGION`` (a region only in ~/.aws/config is not read here: no check then)."""
    return lambda job: (job.providers.get(provider) or {}).get("region") or os.environ.get("AWS_DEFAULT_REGION")


def _ec2_name(name: str) -> str:
    return name[3:] if name.startswith("ml.") else name


EC2_RULES = InstanceRules("ec2", ec2_catalog, owns=lambda n: bool(EC2_TYPE.match(n)), to_own=_ec2_name,
                          defaults=DEFAULTS, region=job_region("ec2"))
EKS_RULES = InstanceRules("eks", ec2_catalog, owns=lambda n: bool(EC2_TYPE.match(n)), to_own=_ec2_name)
SAGEMAKER_RULES = InstanceRules("sagemaker", sagemaker_catalog,
                                owns=lambda n: n.startswith("ml.") and bool(EC2_TYPE.match(n[3:])),
                                to_own=lambda n: n if n.startswith("ml.") else "ml." + n, defaults=DEFAULTS,
                                region=job_region("sagemaker"))


def efa_env(row: Optional[Instance]) -> Dict[str, str]:
    """libfabric's EFA settings for an instance with EFA (device RDMA only where it reads)."""
    env = dict(EFA_ENV)
    if row is not None and row.efa_rdma_read:
        env.update(DEVICE_RDMA)
    return env


def efa_devices(rdma: str, row: Optional[Instance]) -> int:
    """How many EFA devices a node of ``row`` gets with ``network.rdma`` (0: none; row unknown: 0)."""
    if rdma == "off" or row is None:
        return 0
    return row.efa
