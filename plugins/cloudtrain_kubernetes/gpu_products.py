"""Which nodes have the job's accelerator: the label NVIDIA GPU Feature Discovery puts on GPU
nodes (``nvidia.com/gpu.product``) and its values per neutral accelerator
(``catalogs/gpu_products.json``, each value with its source), as a required node affinity
``In`` those values.  ``providers.<p>.gpu_label`` names another label (empty: no affinity) and
``gpu_products`` gives the cluster's own values."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

from cloudtrain.spec.accelerators import is_npu
from cloudtrain.catalogs.catalog import package_file
from cloudtrain.catalogs.instances import job_error
from cloudtrain.spec.job import JobSpec

GFD_LABEL = "nvidia.com/gpu.product"


@lru_cache(maxsize=None)
def products() -> Dict[str, List[str]]:
    """neutral accelerator -> the label values GFD gives its cards (read once)."""
    with open(package_file(__file__, "gpu_products.json"), encoding="utf-8") as f:
        data = json.load(f)
    return {name: [v["value"] for v in values] for name, values in data["products"].items()}


def selection(job: JobSpec, provider: str, label: Optional[str],
              override: Sequence[str] = ()) -> Optional[Tuple[str, Tuple[str, ...]]]:
    """(label, values) for the job's accelerator, None when it names none or ``label`` is empty;
    exit 2 at ``resources.accelerator`` when no value is known for it."""
    accelerator = job.resources.accelerator
    if not accelerator or not label:
        return None
    values = tuple(override) or tuple(products().get(accelerator, ()) if label == GFD_LABEL else ())
    if not values:
        why = ("it is not an NVIDIA GPU" if is_npu(accelerator)
               else f"no public source gives {label} values for it" if label == GFD_LABEL
               else f"{label} is not GFD's label")
        raise job_error(job, ("resources", "accelerator"),
                        f"{provider} selects nodes by {label}, and cloudtrain knows no value of it for {accelerator} "
                        f"({why}; known: {', '.join(sorted(products()))}); set providers.{provider}.gpu_products "
                        f"to your nodes' values (kubectl get nodes -L {label}), or gpu_label: '' to select none")
    return label, values


def node_affinity(label: str, values: Sequence[str]) -> dict:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": label, "operator": "In", "values": list(values)}]}]}}
