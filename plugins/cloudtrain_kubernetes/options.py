"""The settings of the Kubernetes providers (``providers.<name>`` in a job file): ``PodOptions``
(what every job's pods get, on any Kubernetes-based provider: also ``eks`` and ``modelarts-lite``),
``KubeOptions`` (a cluster reached through a kubeconfig) and the per-platform models built on it."""
from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cloudtrain.spec.ports import MasterPort
from cloudtrain.spec.durations import OptionalDuration

from . import names


class PodOptions(BaseModel):
    """What a job's pods get, for any Kubernetes-based provider (``eks`` and ``modelarts-lite``
    add how to reach their cluster)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    namespace: str = Field("default", description="namespace of the job and its objects")
    name: Optional[str] = Field(None, description="object name (default: the job's name, shortened to fit pod names)")
    image: Optional[str] = Field(None, description=(
        "image of every pod (default: the job's image); it needs Python >= 3.8 (the code is shipped in a ConfigMap or"
        " through code_store unless the job says code: null)"))
    image_pull_policy: Optional[str] = Field(None, pattern="^(Always|IfNotPresent|Never)$", description=(
        "imagePullPolicy"))
    image_pull_secrets: List[str] = Field(default_factory=list, description=(
        "names of docker-registry Secrets in the namespace"))
    service_account: Optional[str] = Field(None, description="serviceAccountName of the pods")
    node_selector: Dict[str, str] = Field(default_factory=dict, description="nodeSelector of the pods")
    tolerations: List[Dict[str, Any]] = Field(default_factory=list, description=(
        "tolerations of the pods (Kubernetes' own shape)"))
    spot_node_selector: Dict[str, str] = Field(default_factory=dict, description=(
        "spot: true adds these to nodeSelector: the cluster's label of spot nodes, e.g. {karpenter.sh/capacity-type: "
        "spot} (EKS with Karpenter) or {eks.amazonaws.com/capacityType: SPOT} (EKS managed node groups)"))
    spot_tolerations: List[Dict[str, Any]] = Field(default_factory=list, description=(
        "spot: true adds these tolerations (for spot nodes that carry a taint)"))
    labels: Dict[str, str] = Field(default_factory=dict, description="extra labels on every object and pod")
    pod_annotations: Dict[str, str] = Field(default_factory=dict, description="annotations on every pod")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    workdir: Optional[str] = Field(None, description=(
        "workingDir of the containers: where the shipped code is unpacked (with code: null, where the code is in the "
        "image)"))
    master_port: MasterPort = Field(29500, description="the master's port (torchrun rendezvous, Ray head)")
    shm_gb: float = Field(1.0, gt=0, description=(
        "/dev/shm (an in-memory emptyDir) when the job does not set resources.shm_gb"))
    gpu_resource: str = Field("nvidia.com/gpu", description="extended resource that counts GPUs")
    rdma_resource: Optional[str] = Field(None, description=(
        "RDMA device resource, e.g. rdma/hca, rdma/rdma_shared_device_a or vpc.amazonaws.com/efa; with "
        "network.rdma=auto, RDMA is on iff this is set"))
    rdma_count: int = Field(1, ge=1, description="how many RDMA devices each pod requests")
    rdma_env: Optional[Dict[str, str]] = Field(None, description=(
        "NCCL/UCX variables with RDMA (default: the preset for rdma_resource)"))
    queue: Optional[str] = Field(None, description=(
        "queue of the job: Kueue's LocalQueue (label kueue.x-k8s.io/queue-name) on kubeflow, kubeflow-trainer and "
        "eks; the Volcano queue (spec.queue) on volcano and modelarts-lite"))
    priority_class: Optional[str] = Field(None, description=(
        "priority of the job: Kueue's WorkloadPriorityClass (label kueue.x-k8s.io/priority-class) on kubeflow, "
        "kubeflow-trainer and eks; a PriorityClass (spec.priorityClassName) on volcano and modelarts-lite"))
    code_store: Optional[str] = Field(None, description=(
        "object store for code too large for a ConfigMap (over 900 KiB packed), as SCHEME://BUCKET/PREFIX: s3:// "
        "(eks; kubeflow, kubeflow-trainer and volcano: any S3-compatible store, see code_store_endpoint), obs:// "
        "(modelarts-lite); submit uploads the archive to PREFIX/cloudtrain-code/<sha256>.tar.gz and the pods fetch it"
        " through a time-limited URL"))
    code_store_endpoint: Optional[str] = Field(None, pattern=r"^https?://[^/\s]+/?$", description=(
        "endpoint of an S3-compatible code_store (MinIO, Ceph), e.g. http://minio.example:9000 (default: the store's "
        "own: AWS S3, OBS)"))
    code_shipping: Literal["auto", "configmap", "store"] = Field("auto", description=(
        "how the code reaches the pods: auto (a ConfigMap when the archive fits, else code_store), configmap, or "
        "store (always code_store)"))
    code_url_expires: OptionalDuration = Field("7d", validate_default=True, ge=60, le=7 * 24 * 3600, description=(
        "how long the pods' URL of a stored code archive works: 90s, 30m, 8h, 2d (at most 7d, S3's limit for a "
        "presigned URL); cover the time the job may wait in a queue, and restarts"))

    # Kubernetes' own rules (names.py), so that a value the API server would refuse is bad input
    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v):
        return _valid(v, names.dns1123_label)

    @field_validator("queue", "priority_class", "service_account")
    @classmethod
    def _object_name(cls, v):
        return _valid(v, names.dns1123_subdomain)

    @field_validator("image_pull_secrets")
    @classmethod
    def _object_names(cls, v):
        for item in v:
            _valid(item, names.dns1123_subdomain)
        return v

    @field_validator("labels", "node_selector", "spot_node_selector")
    @classmethod
    def _labels(cls, v):
        for key, value in v.items():
            problem = names.label_key(str(key))
            if problem:
                raise ValueError(problem)
            _valid(value, names.label_value, f"label {key}: ")
        return v


def _valid(value, rule, what: str = ""):
    problem = None if value is None else rule(str(value))
    if problem:
        raise ValueError(f"{what}{problem}")
    return value


class KubeOptions(PodOptions):
    """A cluster reached through a kubeconfig."""

    kubeconfig: Optional[str] = Field(None, description=(
        "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)"))
    context: Optional[str] = Field(None, description="kubeconfig context (default: the current context)")
    gpu_label: Optional[str] = Field("nvidia.com/gpu.product", description=(
        "node label that names the GPU model: with resources.accelerator the pods require a node whose label is one "
        "of its values (NVIDIA GPU Feature Discovery's label by default; empty: no such affinity)"))
    gpu_products: List[str] = Field(default_factory=list, description=(
        "the values of gpu_label that mean resources.accelerator on this cluster (default: the ones public sources "
        "give, see Resources)"))


class QueueSchedulerOption(BaseModel):
    """Who reads a training-operator job's queue (``kubeflow``, ``eks``)."""

    model_config = ConfigDict(defer_build=True)

    queue_scheduler: Literal["kueue", "volcano"] = Field("kueue", description=(
        "kubeflow and eks (training-operator jobs): who reads queue and priority_class: kueue (labels "
        "kueue.x-k8s.io/*) or volcano (an operator that gang-schedules with Volcano: runPolicy.schedulingPolicy "
        "queue, priorityClass, minAvailable)"))


class RayOption(BaseModel):
    """How a ``ray`` job runs (``kubeflow``, ``volcano``): in the operator's pods, or as a
    KubeRay ``RayJob`` (``rayjob.py``)."""

    model_config = ConfigDict(defer_build=True)

    ray: Literal["pods", "rayjob"] = Field("pods", description=(
        "a ray job: pods (cloudtrain's launcher forms the Ray cluster in the operator's pods; the job ends with the "
        "head pod) or rayjob (a KubeRay RayJob, ray.io/v1: KubeRay forms the cluster, the entrypoint runs the job's "
        "command as the Ray driver and its exit status is the job's; needs KubeRay >= 1.x installed, and on volcano "
        "its operator run with --batch-scheduler=volcano for the queue); other distribution types ignore it"))


class KubeflowOptions(RayOption, QueueSchedulerOption, KubeOptions):
    """Training-operator jobs on a cluster reached through a kubeconfig."""


class VolcanoOptions(RayOption, KubeOptions):
    scheduler_name: str = Field("volcano", description="schedulerName of the job")
    plugins: Dict[str, List[str]] = Field(default_factory=dict, description=(
        "extra Volcano job plugins and their arguments (svc and env are always on)"))


class TrainerOptions(BaseModel):
    """Which Kubeflow Trainer runtime a TrainJob runs on (``kubeflow-trainer``; ``eks`` with ``api: trainer``)."""

    model_config = ConfigDict(defer_build=True)

    runtime: Optional[str] = Field(None, description=(
        "the training runtime (default: torch-distributed for ddp and none, deepspeed-distributed for deepspeed; "
        "required for mpi, horovod, ps-worker and ray)"))
    runtime_kind: Literal["ClusterTrainingRuntime", "TrainingRuntime"] = Field("ClusterTrainingRuntime", description=(
        "ClusterTrainingRuntime (cluster-wide) or TrainingRuntime (in the job's namespace)"))
    replicated_jobs: Optional[List[str]] = Field(None, description=(
        "the runtime's replicated jobs that run nodes, which get cloudtrain's volumes and scheduling settings "
        "(default: node; launcher and node for deepspeed-distributed, mpi and horovod)"))


class KubeflowTrainerOptions(TrainerOptions, KubeOptions):
    """A TrainJob on a cluster reached through a kubeconfig."""
