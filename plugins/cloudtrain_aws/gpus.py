"""GPUs per instance of AWS's current NVIDIA training instance types, one small table that the
``sagemaker`` (``ml.`` + the type) and ``ec2`` providers both suggest types from.

Source: AWS's accelerated-computing instance table (https://aws.amazon.com/ec2/instance-types/,
"Accelerated Computing"): g5.xlarge 1 A10G, g5.12xlarge 4 A10G, g5.48xlarge 8 A10G,
p4d.24xlarge 8 A100, p5.48xlarge 8 H100.
"""
from __future__ import annotations

from typing import Dict, Tuple

# instance type -> (GPUs, GPU model)
GPU_TYPES: Dict[str, Tuple[int, str]] = {
    "g5.xlarge": (1, "A10G"),
    "g5.12xlarge": (4, "A10G"),
    "g5.48xlarge": (8, "A10G"),
    "p4d.24xlarge": (8, "A100"),
    "p5.48xlarge": (8, "H100"),
}


def suggest(gpus: int, prefix: str = "") -> str:
    """What to say when a job asks for ``gpus`` per node and names no instance type: types with
    exactly that many GPUs, or that none has that many and which counts exist."""
    fits = [f"{prefix}{kind} ({model})" for kind, (count, model) in GPU_TYPES.items() if count == gpus]
    if fits:
        return f"name an instance type with {gpus} GPUs, e.g. {', '.join(fits)}"
    counts = sorted({count for count, _ in GPU_TYPES.values()})
    by_count = "; ".join(f"{c}: {prefix}{next(k for k, (n, _) in GPU_TYPES.items() if n == c)}" for c in counts)
    return (f"AWS's GPU training instance types (g5, p4d, p5) have {', '.join(map(str, counts[:-1]))} or "
            f"{counts[-1]} GPUs, none has {gpus}; set resources.gpus_per_node to one of those and name a type "
            f"({by_count})")
