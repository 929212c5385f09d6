"""Neutral accelerator names: what ``resources.accelerator`` accepts, with aliases and case folded.

A name means one chip and memory size, as SkyPilot's catalogs name them (``A100`` is the 40 GB
part, ``A100-80GB`` the 80 GB one).  Each provider's catalog maps its instance types onto these.
Standard library only: the job model imports it.
"""
from __future__ import annotations

from typing import Dict, Tuple

KNOWN: Tuple[str, ...] = (
    "B300", "B200", "H200", "H100", "H800", "H20", "A100-80GB", "A100", "A800", "RTX-PRO-6000", "RTX-PRO-4500",
    "L40S", "L20", "L4", "A10G", "A10", "T4", "V100-32GB", "V100", "Ascend-910C", "Ascend-910B", "Ascend-910",
)
# The cards Chinese clusters run, as their platforms name them: H800 and A800 (NVIDIA's export
# parts of H100 and A100 80 GB; TI-ONE's resource-group card types, tencentcloud-sdk-python-tione
# models.ResourceConf.GpuType "eg: H800,A800,A100,T4,P4,V100"), H20 and L20 (NVIDIA's later China
# parts, Hopper 96 GB and Ada 48 GB), Ascend 910C (Huawei's, ModelArts' Snt9C: Ascend 910 parts are
# named Snt9 / Snt9B on ModelArts, the seeds and the SDK's flavor names).
# other spellings -> the neutral name (keys compared case-folded, without spaces, '_' read as '-')
ALIASES: Dict[str, str] = {
    "a100-40gb": "A100", "a100-sxm4-40gb": "A100", "a100-80g": "A100-80GB", "a100-sxm4-80gb": "A100-80GB",
    "h100-80gb": "H100", "h100-sxm": "H100", "h200-141gb": "H200", "v100-16gb": "V100",
    "910b": "Ascend-910B", "ascend910b": "Ascend-910B", "ascend-snt9b": "Ascend-910B", "snt9b": "Ascend-910B",
    "rtx-pro-server-6000": "RTX-PRO-6000", "rtxpro6000": "RTX-PRO-6000", "rtx-pro-6000-blackwell": "RTX-PRO-6000",
    "rtxpro4500": "RTX-PRO-4500", "rtx-pro-4500-blackwell": "RTX-PRO-4500",
    "910": "Ascend-910", "ascend910": "Ascend-910", "ascend-snt9": "Ascend-910", "snt9": "Ascend-910",
    "910c": "Ascend-910C", "ascend910c": "Ascend-910C", "ascend-snt9c": "Ascend-910C", "snt9c": "Ascend-910C",
    "a800-80gb": "A800", "a800-sxm4-80gb": "A800", "h800-80gb": "H800", "h20-96gb": "H20", "l20-48gb": "L20",
}
_FOLDED = {name.lower(): name for name in KNOWN}


def _fold(name: str) -> str:
    key = name.strip().lower().replace("_", "-").replace(" ", "")
    for prefix in ("nvidia-", "tesla-", "huawei-"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    return key


def canonical(name: str) -> str:
    """``a100`` -> ``A100``, ``nvidia_a100_80gb`` -> ``A100-80GB``; ValueError names the known ones."""
    key = _fold(name)
    found = _FOLDED.get(key) or ALIASES.get(key)
    if found is None:
        raise ValueError(f"unknown accelerator {name!r}; known: {', '.join(KNOWN)} "
                         "(cloudtrain resources lists what each provider offers)")
    return found


def is_npu(name: str) -> bool:
    return name.startswith("Ascend")
