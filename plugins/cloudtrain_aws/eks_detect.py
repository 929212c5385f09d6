"""The ``eks`` node environment: Kubeflow's (v1 jobs or a Trainer v2 TrainJob), on EKS
(standard library only, shipped into pods)."""
from __future__ import annotations

from typing import Mapping, Optional

from cloudtrain.launch.topology import Topology
from cloudtrain_kubernetes.detect import detect_kubeflow, emulate_kubeflow
from cloudtrain_kubernetes.trainer_detect import detect_kubeflow_trainer


def detect(environ: Mapping[str, str]) -> Optional[Topology]:
    topology = detect_kubeflow_trainer(environ) or detect_kubeflow(environ)
    if topology is not None:
        topology.platform = "eks"
    return topology


def emulate(job, node_index: int, cluster):
    return emulate_kubeflow(job, node_index, cluster)
