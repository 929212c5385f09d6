"""ModelArts Standard's flavors: the public flavors (``catalogs/modelarts.json``) that
``resources.accelerator`` x ``gpus_per_node`` resolves to, a dedicated pool's
``modelarts.pool.visual.<n>xlarge`` by card count, and the refresh through the SDK's
``show_training_job_flavors`` (``GET /v2/{project_id}/training-job-flavors``).

On a dedicated pool (``pool_id``) the flavor only says how many cards a node gets; the card type
(GPU or Ascend) is the pool's, which render cannot see offline: a warning says so.
"""
from __future__ import annotations

import datetime
import os
import re
import warnings
from dataclasses import dataclass
from typing import Iterable, List, Optional

from cloudtrain.catalogs import catalog as cat
from cloudtrain.spec.accelerators import canonical
from cloudtrain.catalogs.catalog import Catalog, Instance, load, package_file
from cloudtrain.spec.errors import CloudtrainWarning
from cloudtrain.catalogs.instances import InstanceRules, job_error, once, wanted
from cloudtrain.spec.job import JobSpec

CATALOG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogs")
# Dedicated-pool flavors by cards per node (the SDK's SpecResource docstring; 16 only on Snt9b23 pools).
POOL_FLAVORS = {1: "modelarts.pool.visual.xlarge", 2: "modelarts.pool.visual.2xlarge",
                4: "modelarts.pool.visual.4xlarge", 8: "modelarts.pool.visual.8xlarge",
                16: "modelarts.pool.visual.16xlarge"}
SOURCE = ("GET /v2/{project_id}/training-job-flavors (ShowTrainingJobFlavors) through huaweicloudsdkmodelarts, "
          "by cloudtrain_modelarts.catalog: flavor_info.gpu / npu unit_num and product_name, cpu.core_num, "
          "memory.size")
NOTES = "price: null: the billing codes are not priced offline."
POOL_HINT = ("a dedicated pool runs any card its nodes have: set providers.modelarts.pool_id (the flavor is then "
             "modelarts.pool.visual.<n>xlarge by gpus_per_node)")


def modelarts_catalog() -> Catalog:
    return load(package_file(__file__, "modelarts.json"))


RULES = InstanceRules("modelarts", modelarts_catalog, option="flavor_id", owns=lambda n: n.startswith("modelarts."),
                      noun="public flavor", hint=lambda: POOL_HINT)


def pool_flavor(job: JobSpec, flavor_id: Optional[str], pool_id: str) -> Optional[str]:
    """A dedicated pool's flavor: ``flavor_id`` (its card count checked when it is a pool flavor),
    else ``modelarts.pool.visual.<n>xlarge`` for the job's cards per node.  Warns once that the
    pool's card type is not checked."""
    return once(job, ("modelarts-pool", flavor_id, pool_id), lambda: _pool_flavor(job, flavor_id, pool_id))


def _pool_flavor(job: JobSpec, flavor_id: Optional[str], pool_id: str) -> Optional[str]:
    found = wanted(job, RULES)  # resources.instance_type of any catalog -> its accelerator x count
    count = job.resources.gpus_per_node or (found[1] if found else 0)
    if flavor_id:
        cards = {v: k for k, v in POOL_FLAVORS.items()}.get(flavor_id)
        if cards is not None and count and cards != count:
            raise job_error(job, ("providers", "modelarts", "flavor_id"),
                            f"{flavor_id} gives {cards} card(s) per node, but resources.gpus_per_node is {count}; "
                            f"use {POOL_FLAVORS.get(count, 'a flavor with that count')} or drop flavor_id")
        chosen = flavor_id
    elif not count:
        return None
    elif count not in POOL_FLAVORS:
        raise job_error(job, ("resources", "gpus_per_node"),
                        f"a ModelArts dedicated pool gives 1, 2, 4, 8 or 16 cards per node "
                        f"(modelarts.pool.visual.<n>xlarge), not {count}; set gpus_per_node to one of those")
    else:
        chosen = POOL_FLAVORS[count]
    if found:
        warnings.warn(f"{chosen} on pool {pool_id}: the card type is the pool's, which cloudtrain cannot see offline; "
                      f"make sure its nodes have {found[0]}", CloudtrainWarning, stacklevel=4)
    return chosen


# -- refresh -----------------------------------------------------------------------------------
def neutral(product: Optional[str], memory: Optional[str]) -> Optional[str]:
    """A flavor's card (``product_name``, ``memory`` such as "32GB") as a neutral name, or None."""
    if not product:
        return None
    size = re.search(r"(\d+)\s*G", memory or "")
    for name in ([f"{product}-{size.group(1)}GB"] if size else []) + [product]:
        try:
            return canonical(name)
        except ValueError:
            continue
    return None


def row_of(flavor: dict) -> Optional[Instance]:
    """One ``FlavorResponse`` (as a dict) as a catalog row (None: no card with a neutral name)."""
    info = flavor.get("flavor_info") or {}
    card = info.get("gpu") or info.get("npu") or {}
    accelerator = neutral(card.get("product_name"), card.get("memory"))
    if not flavor.get("flavor_id") or accelerator is None or not card.get("unit_num"):
        return None
    memory = (info.get("memory") or {}).get("size")
    return Instance(instance_type=flavor["flavor_id"], accelerator=accelerator, count=int(card["unit_num"]),
                    vcpus=(info.get("cpu") or {}).get("core_num"), memory_gb=memory)


def fetch(client) -> List[Instance]:
    from huaweicloudsdkmodelarts.v1 import ShowTrainingJobFlavorsRequest
    response = client.show_training_job_flavors(ShowTrainingJobFlavorsRequest())
    flavors = [f.to_dict() for f in (response.flavors or [])]
    return [row for row in map(row_of, flavors) if row is not None]


def write(rows: Iterable[Instance], out_dir: str, date: Optional[str] = None) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "modelarts.json")
    cat.write_text(path, cat.dump("modelarts", rows, date=date or datetime.date.today().isoformat(), source=SOURCE,
                                  notes=NOTES))
    return path


def refresh(client=None, region: Optional[str] = None, out_dir: str = CATALOG_DIR) -> List[str]:
    """``modelarts.json`` from the account's public training flavors (the SDK's credentials and
    region, as for the provider)."""
    from cloudtrain.spec.errors import PlatformError

    from . import sdk
    if client is None:
        client = sdk.modelarts_client("modelarts", sdk.region_of(region))
    with sdk.api_errors("ModelArts", "show_training_job_flavors"):
        rows = fetch(client)
    if not rows:
        raise PlatformError("ModelArts listed no training flavor with cards cloudtrain can name; the catalog is "
                            "left as it was")
    return [write(rows, out_dir)]


# -- a CPU job's flavor, chosen at submit from the region's list ---------------------------------
# Huawei publishes no list of CPU training flavors, so the catalog has none: a job that asks for no
# accelerator gets the region's smallest fitting CPU flavor at submit, read through the SDK's
# ShowTrainingJobFlavorsRequest(flavor_type="CPU") (query values: CPU, GPU, Ascend).
CPU_FLAVOR_TYPE = "CPU"
MEMORY_UNITS = {"gb": 1.0, "gib": 1.0, "g": 1.0, "mb": 1 / 1024, "mib": 1 / 1024, "m": 1 / 1024,
                "tb": 1024.0, "tib": 1024.0}


@dataclass(frozen=True)
class CpuFlavor:
    """A CPU-only training flavor of a region: its vCPUs, memory (GB) and the most nodes a job
    may have on it (``flavor_info.max_num``; None: not said)."""

    flavor_id: str
    vcpus: float
    memory_gb: float
    max_nodes: Optional[int] = None

    def fits(self, cpus: Optional[float], memory_gb: Optional[float], nodes: int) -> bool:
        return ((cpus is None or self.vcpus >= cpus) and (memory_gb is None or self.memory_gb >= memory_gb)
                and (not self.max_nodes or self.max_nodes >= nodes))

    def __str__(self) -> str:
        nodes = f", at most {self.max_nodes} node(s)" if self.max_nodes else ""
        return f"{self.flavor_id} ({self.vcpus:g} vCPUs, {self.memory_gb:g} GB{nodes})"


def cpu_flavor_of(flavor: dict) -> Optional[CpuFlavor]:
    """One ``FlavorResponse`` (as a dict) of a CPU-only flavor; None for a flavor with cards or
    without a size."""
    info = flavor.get("flavor_info") or {}
    if info.get("gpu") or info.get("npu") or (flavor.get("flavor_type") or CPU_FLAVOR_TYPE) != CPU_FLAVOR_TYPE:
        return None
    cores = (info.get("cpu") or {}).get("core_num")
    memory = info.get("memory") or {}
    scale = MEMORY_UNITS.get(str(memory.get("unit") or "GB").strip().lower())
    if not flavor.get("flavor_id") or not cores or memory.get("size") is None or scale is None:
        return None
    return CpuFlavor(flavor["flavor_id"], float(cores), memory["size"] * scale,
                     info.get("max_num") or flavor.get("max_num"))


def cpu_flavors(client) -> List[CpuFlavor]:
    """The region's CPU training flavors (``client``: the region's ``ModelArtsClient``)."""
    from huaweicloudsdkmodelarts.v1 import ShowTrainingJobFlavorsRequest
    response = client.show_training_job_flavors(ShowTrainingJobFlavorsRequest(flavor_type=CPU_FLAVOR_TYPE))
    found = [cpu_flavor_of(f.to_dict()) for f in (response.flavors or [])]
    return [flavor for flavor in found if flavor is not None]


def size_text(vcpus: Optional[float], memory_gb: Optional[float]) -> str:
    """``8 vCPUs / 32 GB`` (what is given of the two), or ``any size``."""
    parts = ([f"{vcpus:g} vCPUs"] if vcpus else []) + ([f"{memory_gb:g} GB"] if memory_gb else [])
    return " / ".join(parts) or "any size"


def smallest_cpu_flavor(flavors: Iterable[CpuFlavor], cpus: Optional[float], memory_gb: Optional[float],
                        nodes: int = 1) -> Optional[CpuFlavor]:
    """The smallest flavor (vCPUs, then memory, then name) with at least ``cpus`` and
    ``memory_gb`` that takes ``nodes`` nodes."""
    fit = [f for f in flavors if f.fits(cpus, memory_gb, nodes)]
    return min(fit, key=lambda f: (f.vcpus, f.memory_gb, f.flavor_id)) if fit else None
