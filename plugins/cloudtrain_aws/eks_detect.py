"""The ``eks`` node environment: Kubeflow's, on EKS (standard library only, shipped into pods)."""
from __future__ import annotations

from typing import Mapping, Optional

from cloudtrain.launch.topology import Topology
from cloudtrain_kubernetes.detect import detect_kubeflow


def detect(environ: Mapping[str, str]) -> Optional[Topology]:
    topology = detect_kubeflow(environ)
    if topology is not None:
        topology.platform = "eks"
    return topology
