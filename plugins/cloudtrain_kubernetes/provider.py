"""``kubeflow``, ``volcano`` and ``kubeflow-trainer``: a job as Kubernetes objects, sent with the
official client.

``KubernetesProvider`` is a ``cloudtrain.cloud.CloudProvider`` and the shared base of every
Kubernetes provider (also ``eks`` and ``modelarts-lite``).  ``submit``: the render's objects are
created in order -- the job's Secret (with the real values) and ConfigMaps, the job object, then
the job is made their owner so deleting it removes them.  A job's id is ``<namespace>/<name>``;
its spec hash is the ``cloudtrain.io/spec-hash`` annotation the render stamps on the job object:
an existing job of the same name and hash is followed, one with another hash is an error that
says how to proceed.  ``status`` reads the job object (the pods too, for a failed job's exit
code), ``logs`` streams each pod's log (``podlogs``), ``cancel`` deletes the job.

A provider built on it overrides only these (docs/plugins.md, "Kubernetes providers"):

- ``platform``, ``kinds``, ``states``, ``Options``: the launcher's platform (the pods run
  ``cloudtrain launch --platform <platform>`` with its detector in the launcher bundle), the job
  kinds it creates, their state table, its options (a ``PodOptions`` subclass);
- ``manifest_options(job, options)``: ``super()``, then ``dataclasses.replace`` what the
  platform does differently; ``gpu_selection(job, options)``: the node label of the GPU model;
- ``manifests(job, options)``: the objects to create (pure); ``check(job, options)``;
- ``target(options)`` / ``target_keys`` / ``connect(target)`` / ``list_targets()``: how to reach
  the cluster (a kubeconfig here; ``eks``: a token from STS, ``modelarts-lite``: a certificate
  from CCE); ``target`` is what the store keeps so that ``status HANDLE`` reaches the cluster
  again from any shell, ``api_client(target)`` the client made once per cluster;
- ``job_state(obj)``, ``node_count(obj)``, ``pod_selector(obj)``, ``node_index(obj, pod)``: how
  to read a job object and find its pods in node order.
"""
from __future__ import annotations

import abc
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cloudtrain.durations import OptionalDuration
from cloudtrain.errors import BadInput, JobFileError, JobNotFound, MissingCredentials, PlatformError
from cloudtrain.job import JobSpec
from cloudtrain.cloud import CloudProvider, timestamp
from cloudtrain.provider import Artifact, Cluster, JobStatus, Rendered, State
from cloudtrain.survival import checkpoint_uri, field_error

from . import codestore
from . import manifests as m
from . import names, podlogs, trainjob

# kind -> (group, version, plural)
RESOURCES = {
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "MPIJob": ("kubeflow.org", "v2beta1", "mpijobs"),
    "TFJob": ("kubeflow.org", "v1", "tfjobs"),
    "Job": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "TrainJob": trainjob.RESOURCE,
}


class PodOptions(BaseModel):
    """What a job's pods get, for any Kubernetes-based provider (``eks`` and ``modelarts-lite``
    add how to reach their cluster)."""

    model_config = ConfigDict(extra="forbid")

    namespace: str = Field("default", description="namespace of the job and its objects")
    name: Optional[str] = Field(None, description="object name (default: the job's name, shortened to fit pod names)")
    image: Optional[str] = Field(None, description="image of every pod (default: the job's image); it needs Python >= 3.8 (the code is shipped in a ConfigMap or through code_store unless the job says code: null)")
    image_pull_policy: Optional[str] = Field(None, pattern="^(Always|IfNotPresent|Never)$", description="imagePullPolicy")
    image_pull_secrets: List[str] = Field(default_factory=list, description="names of docker-registry Secrets in the namespace")
    service_account: Optional[str] = Field(None, description="serviceAccountName of the pods")
    node_selector: Dict[str, str] = Field(default_factory=dict, description="nodeSelector of the pods")
    tolerations: List[Dict[str, Any]] = Field(default_factory=list, description="tolerations of the pods (Kubernetes' own shape)")
    spot_node_selector: Dict[str, str] = Field(default_factory=dict, description="spot: true adds these to nodeSelector: the cluster's label of spot nodes, e.g. {karpenter.sh/capacity-type: spot} (EKS with Karpenter) or {eks.amazonaws.com/capacityType: SPOT} (EKS managed node groups)")
    spot_tolerations: List[Dict[str, Any]] = Field(default_factory=list, description="spot: true adds these tolerations (for spot nodes that carry a taint)")
    labels: Dict[str, str] = Field(default_factory=dict, description="extra labels on every object and pod")
    pod_annotations: Dict[str, str] = Field(default_factory=dict, description="annotations on every pod")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    workdir: Optional[str] = Field(None, description="workingDir of the containers: where the shipped code is unpacked (with code: null, where the code is in the image)")
    master_port: int = Field(29500, ge=1024, le=65000, description="the master's port (torchrun rendezvous, Ray head)")
    shm_gb: float = Field(1.0, gt=0, description="/dev/shm (an in-memory emptyDir) when the job does not set resources.shm_gb")
    gpu_resource: str = Field("nvidia.com/gpu", description="extended resource that counts GPUs")
    rdma_resource: Optional[str] = Field(None, description="RDMA device resource, e.g. rdma/hca, rdma/rdma_shared_device_a or vpc.amazonaws.com/efa; with network.rdma=auto, RDMA is on iff this is set")
    rdma_count: int = Field(1, ge=1, description="how many RDMA devices each pod requests")
    rdma_env: Optional[Dict[str, str]] = Field(None, description="NCCL/UCX variables with RDMA (default: the preset for rdma_resource)")
    queue: Optional[str] = Field(None, description="queue of the job: Kueue's LocalQueue (label kueue.x-k8s.io/queue-name) on kubeflow, kubeflow-trainer and eks; the Volcano queue (spec.queue) on volcano and modelarts-lite")
    priority_class: Optional[str] = Field(None, description="priority of the job: Kueue's WorkloadPriorityClass (label kueue.x-k8s.io/priority-class) on kubeflow, kubeflow-trainer and eks; a PriorityClass (spec.priorityClassName) on volcano and modelarts-lite")
    code_store: Optional[str] = Field(None, description="object store for code too large for a ConfigMap (over 900 KiB packed), as SCHEME://BUCKET/PREFIX: s3:// (eks; kubeflow, kubeflow-trainer and volcano: any S3-compatible store, see code_store_endpoint), obs:// (modelarts-lite); submit uploads the archive to PREFIX/cloudtrain-code/<sha256>.tar.gz and the pods fetch it through a time-limited URL")
    code_store_endpoint: Optional[str] = Field(None, pattern=r"^https?://[^/\s]+/?$", description="endpoint of an S3-compatible code_store (MinIO, Ceph), e.g. http://minio.example:9000 (default: the store's own: AWS S3, OBS)")
    code_shipping: Literal["auto", "configmap", "store"] = Field("auto", description="how the code reaches the pods: auto (a ConfigMap when the archive fits, else code_store), configmap, or store (always code_store)")
    code_url_expires: OptionalDuration = Field("7d", validate_default=True, ge=60, le=7 * 24 * 3600, description="how long the pods' URL of a stored code archive works: 90s, 30m, 8h, 2d (at most 7d, S3's limit for a presigned URL); cover the time the job may wait in a queue, and restarts")

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

    kubeconfig: Optional[str] = Field(None, description="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
    context: Optional[str] = Field(None, description="kubeconfig context (default: the current context)")
    gpu_label: Optional[str] = Field("nvidia.com/gpu.product", description="node label that names the GPU model: with resources.accelerator the pods require a node whose label is one of its values (NVIDIA GPU Feature Discovery's label by default; empty: no such affinity)")
    gpu_products: List[str] = Field(default_factory=list, description="the values of gpu_label that mean resources.accelerator on this cluster (default: the ones public sources give, see Resources)")


class QueueSchedulerOption(BaseModel):
    """Who reads a training-operator job's queue (``kubeflow``, ``eks``)."""

    queue_scheduler: Literal["kueue", "volcano"] = Field("kueue", description="kubeflow and eks (training-operator jobs): who reads queue and priority_class: kueue (labels kueue.x-k8s.io/*) or volcano (an operator that gang-schedules with Volcano: runPolicy.schedulingPolicy queue, priorityClass, minAvailable)")


class KubeflowOptions(QueueSchedulerOption, KubeOptions):
    """Training-operator jobs on a cluster reached through a kubeconfig."""


class VolcanoOptions(KubeOptions):
    scheduler_name: str = Field("volcano", description="schedulerName of the job")
    plugins: Dict[str, List[str]] = Field(default_factory=dict, description="extra Volcano job plugins and their arguments (svc and env are always on)")


KUEUE_GROUP = "kueue.x-k8s.io"


def _ns_name(obj: dict) -> Tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _api_error(exc, doing: str) -> PlatformError:
    """A kubernetes ApiException as one line: what failed, the server's reason, the fix."""
    import json
    status, reason, message = getattr(exc, "status", None), getattr(exc, "reason", ""), ""
    try:
        message = json.loads(exc.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        pass
    fix = {401: "check the kubeconfig's credentials", 403: "ask for RBAC rights on these resources",
           404: "is the operator's CRD installed in this cluster?"}.get(status, "check the cluster and retry")
    return PlatformError(f"{doing} failed: {status} {reason}{': ' + message if message else ''}; {fix}")


@dataclass
class KubeJob:
    """One read of a job (``_describe``): its object (None once ``cancel`` deleted it), the
    cluster it is on, and for a failed job the first non-zero exit code of its pods."""

    obj: Optional[dict]
    target: Dict[str, Any]
    exit_code: Optional[int] = None


class KubernetesProvider(CloudProvider):
    """The shared lifecycle of every provider whose job is a set of Kubernetes objects; what a
    provider built on it overrides is listed in the module's docstring (and docs/plugins.md)."""

    extra = "kubernetes"
    sdk_modules = ("kubernetes",)
    Options = KubeOptions
    # The kinds of job object this provider creates and looks for (keys of RESOURCES).
    kinds: Tuple[str, ...] = ()
    # The keys of ``target()`` that tell one cluster from another (one API client each).
    target_keys: Tuple[str, ...] = ("kubeconfig", "context")
    storage_schemes: Tuple[str, ...] = ("pvc",)  # PersistentVolumeClaims: pvc://CLAIM[/PATH]
    code_optional = True  # code: null: no code ConfigMap, the pods run in the image's workdir
    status_poll = 2.0  # an API server's reads are cheap

    def sized(self, job: JobSpec) -> JobSpec:
        """``resources.instance_type`` on a cluster whose nodes cloudtrain does not choose by type
        (no catalog, ``instance_rules()`` None): as docs/job-file.md says, its accelerator and count,
        from the installed catalog that lists it (exit 2 when none does), said in a warning.  A
        cluster's nodes are whatever the cluster has: the type's own label
        (``node.kubernetes.io/instance-type``) is the user's to pin through ``node_selector``."""
        r = job.resources
        if not r.instance_type or self.instance_rules() is not None:
            return job
        import warnings
        from cloudtrain.catalog import Catalog
        from cloudtrain.errors import CloudtrainWarning
        from cloudtrain.instances import InstanceRules, wanted
        accelerator, count = wanted(job, InstanceRules(self.name, lambda: Catalog(self.name, [])))
        warnings.warn(f"resources.instance_type {r.instance_type}: {self.name} does not choose a cluster's nodes by "
                      f"type; its pods ask for its {accelerator} x {count} instead (resources.accelerator, "
                      f"gpus_per_node); to pin the type too, set providers.{self.name}.node_selector "
                      f"{{node.kubernetes.io/instance-type: {r.instance_type}}}", CloudtrainWarning, stacklevel=3)
        resources = r.model_copy(update={"accelerator": accelerator, "gpus_per_node": count, "instance_type": None})
        return job.model_copy(update={"resources": resources})

    def validate(self, job: JobSpec, *, submit: bool = False, policy=()):
        return super().validate(self.sized(job), submit=submit, policy=policy)

    def render(self, job: JobSpec, *, submit: bool = False, policy=()) -> Rendered:
        return super().render(self.sized(job), submit=submit, policy=policy)

    def __init__(self, api_client=None, store=None, poll: Optional[float] = None):
        """``api_client``: a ``kubernetes.client.ApiClient`` used for every cluster (tests);
        ``store``: where the cluster of each submitted job is remembered (default: the user's);
        ``poll``: seconds between reads while a job is followed or waited for."""
        super().__init__(poll=poll)
        self._api_client = api_client
        self._clients: Dict[str, Any] = {}
        self._store = store

    # -- rendering (pure) --------------------------------------------------------------------
    def manifest_options(self, job: JobSpec, options: PodOptions) -> m.ManifestOptions:
        """The options of ``cloudtrain_kubernetes.manifests`` for this job; a platform calls
        ``super()`` and ``dataclasses.replace``s what it does differently."""
        fields = {k: getattr(options, k) for k in (
            "namespace", "name", "image", "image_pull_policy", "image_pull_secrets", "service_account",
            "node_selector", "tolerations", "labels", "pod_annotations", "python", "workdir", "master_port",
            "shm_gb", "gpu_resource", "rdma_resource", "rdma_count", "rdma_env", "queue", "priority_class")}
        fields["queue_scheduler"] = getattr(options, "queue_scheduler", "kueue")
        if job.spot:  # the cluster says which nodes are spot: its labels and taints
            fields["node_selector"] = {**options.spot_node_selector, **options.node_selector}
            fields["tolerations"] = [*options.tolerations, *options.spot_tolerations]
        return m.ManifestOptions.of({**fields, "provider": self.name, "platform": self.platform,
                                     "gpu_selection": self.gpu_selection(job, options),
                                     "detector_targets": self.node_platform().bundle_targets,
                                     "code": codestore.code_payload(self, job, options)})

    # -- the code: a ConfigMap, or an object store (codestore) -------------------------------------
    # The schemes of providers.<name>.code_store whose time-limited URLs this provider's pods fetch.
    code_store_schemes: Tuple[str, ...] = ("s3",)

    def code_store_settings(self, options: PodOptions) -> Dict[str, Any]:
        """The code store's constructor arguments (None values are left out)."""
        return {"endpoint": options.code_store_endpoint}

    def ship_code(self, rendered: Rendered) -> List[str]:
        return codestore.ship(self, rendered)

    def gpu_selection(self, job: JobSpec, options: PodOptions):
        """(label, values) the pods' nodes must have for ``resources.accelerator`` (None: none)."""
        if not isinstance(options, KubeOptions):  # eks selects nodes by instance type instead
            return None
        from .gpu_products import selection
        return selection(job, self.name, options.gpu_label, options.gpu_products)

    @abc.abstractmethod
    def manifests(self, job: JobSpec, options: PodOptions) -> List[dict]:
        """The objects to create, in order (pure): the job's Secret and ConfigMaps, then the job
        object (one of ``kinds``), built from ``manifest_options(job, options)``."""

    def check(self, job: JobSpec, options: PodOptions) -> None:
        checkpoint_uri(job, "a Kubernetes cluster", ("pvc",), "pvc://team-checkpoints/digits (a ReadWriteMany claim)")
        if job.spot and not (options.spot_node_selector or options.spot_tolerations):
            raise field_error(job, ("spot",), f"Kubernetes has no spot field: set providers.{self.name}.spot_node_selector "
                                              "(and spot_tolerations if spot nodes are tainted) to your cluster's spot "
                                              "nodes, e.g. {karpenter.sh/capacity-type: spot} (EKS with Karpenter)")
        if not (options.image or job.image):
            raise BadInput(f"{self.where(job)}the job has no image; set `image` (or providers.{self.name}.image) "
                           "to an image that contains the code and Python >= 3.8")
        try:
            m.object_name(job, self.manifest_options(job, options))
        except ValueError as exc:
            raise BadInput(f"{self.where(job)}providers.{self.name}.name: {exc}; use lowercase letters, digits and '-'") from None

    @staticmethod
    def where(job: JobSpec) -> str:
        return f"{job.source.path}: " if job.source and job.source.path else ""

    def artifacts(self, job: JobSpec, options: PodOptions) -> List[Artifact]:
        mopts = self.manifest_options(job, options)
        return codestore.upload_artifact(mopts.code) + [
            Artifact("kubernetes/manifest", f"{o['kind']}/{o['metadata']['name']}", o) for o in self.manifests(job, options)]

    # -- reaching the cluster ----------------------------------------------------------------
    def target(self, options: KubeOptions) -> Dict[str, Any]:
        """What to remember (in the store, at submit) to reach this job's cluster again from
        any shell; never a credential."""
        return {"kubeconfig": options.kubeconfig, "context": options.context}

    def api_client(self, target: Dict[str, Any]):
        """The client for ``target``'s cluster (an injected one wins), made once per cluster."""
        if self._api_client is not None:
            return self._api_client
        import json
        key = json.dumps({k: target.get(k) for k in sorted(self.target_keys)}, sort_keys=True)
        if key not in self._clients:
            self._clients[key] = self.connect(target)
        return self._clients[key]

    def connect(self, target: Dict[str, Any]):
        """A new ``kubernetes.client.ApiClient`` for ``target``: here, from a kubeconfig."""
        kubernetes = self.require_sdk("kubernetes")
        from kubernetes import config
        try:
            if target.get("kubeconfig") or target.get("context") or not _in_cluster():
                import os  # KUBECONFIG read now, not when the client was imported
                path = target.get("kubeconfig") or os.environ.get("KUBECONFIG") or "~/.kube/config"
                if not target.get("kubeconfig"):
                    no_kubeconfig(path)
                return config.new_client_from_config(config_file=path, context=target.get("context"))
            config.load_incluster_config()
            return kubernetes.client.ApiClient()
        except (config.ConfigException, OSError) as exc:
            raise PlatformError(f"cannot load the kubeconfig ({exc}); fix that file or its context, or name "
                                "another with KUBECONFIG") from None

    def list_targets(self) -> List[Dict[str, Any]]:
        """The clusters ``list`` looks at: here, the kubeconfig's current context."""
        return [{}]

    @property
    def store(self):
        """Where the cluster (``target``) of each submitted job is remembered."""
        if self._store is None:
            from cloudtrain.store import Store
            self._store = Store()
        return self._store

    def _apis(self, target: Dict[str, Any]):
        from kubernetes import client
        api = self.api_client(target)
        return client.CustomObjectsApi(api), client.CoreV1Api(api)

    def _target_of(self, job_id: str) -> Dict[str, Any]:
        return self.store.recall(self.handle(job_id)) or {}

    # -- submitting (CloudProvider.schedule: spec_hash, _find_by_spec, else _create) -----------
    @staticmethod
    def job_object(rendered: Rendered) -> dict:
        """The job object among the rendered manifests (the one whose kind is in RESOURCES)."""
        return next(a.content for a in rendered.artifacts
                    if a.kind == "kubernetes/manifest" and a.content["kind"] in RESOURCES)

    def spec_hash(self, rendered: Rendered) -> str:
        """The job object's ``cloudtrain.io/spec-hash`` annotation: the render stamps it over the
        manifest (the code's digest included) and the cluster keeps it with the job."""
        return self.job_object(rendered)["metadata"]["annotations"][m.ANNOTATION_HASH]

    def _submit_target(self, rendered: Rendered, wanted: dict) -> Dict[str, Any]:
        return {**self.target(rendered.options), "kind": wanted["kind"]}

    def _find_by_spec(self, rendered: Rendered, spec: str) -> Optional[str]:
        """The job of this name, when it exists: followed if its spec hash is ``spec``, refused
        (with how to proceed) if it is another job's."""
        from kubernetes.client.exceptions import ApiException
        wanted = self.job_object(rendered)
        target = self._submit_target(rendered, wanted)
        try:
            existing = self._get_job(self._apis(target)[0], wanted["kind"], *_ns_name(wanted))
        except ApiException as exc:
            raise _api_error(exc, f"creating {wanted['kind']} {'/'.join(_ns_name(wanted))}") from None
        if existing is None:
            return None
        return self._attach(existing, wanted, spec, target)

    def _check_queue_admits(self, wanted: dict, target: Dict[str, Any]) -> None:
        """A job cloudtrain creates suspended (a TrainJob with a queue: ``trainjob.train_job``)
        starts only when Kueue resumes it; on a cluster that serves no ``kueue.x-k8s.io`` API it
        would stay suspended for ever, so nothing is created.  A discovery the credentials may not
        make says nothing either way: the job is created."""
        if not (wanted.get("spec") or {}).get("suspend"):
            return
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        try:
            groups = {g.name for g in client.ApisApi(self.api_client(target)).get_api_versions().groups or []}
        except ApiException:
            return
        if KUEUE_GROUP not in groups:
            raise PlatformError(f"the cluster serves no {KUEUE_GROUP} API (kubectl api-versions): Kueue is not installed, "
                                f"and a {wanted['kind']} queued with providers.{self.name}.queue starts suspended until "
                                f"Kueue admits it, so it would never start; install Kueue with its {wanted['kind']} "
                                f"integration enabled, or unset providers.{self.name}.queue")

    def _create(self, rendered: Rendered, secrets: Dict[str, str], spec: str) -> str:
        """The Secret (the real values) and ConfigMaps, the job object, then the job made their
        owner (deleting it deletes them)."""
        from kubernetes.client.exceptions import ApiException
        wanted = self.job_object(rendered)
        target = self._submit_target(rendered, wanted)
        custom, core = self._apis(target)
        ns, name = _ns_name(wanted)
        group, version, plural = RESOURCES[wanted["kind"]]
        self._check_queue_admits(wanted, target)
        try:
            code_url = codestore.fetch_url(self, rendered)  # a stored archive: uploaded, and its URL
            owned = [self._create_core(core, self._filled(rendered, a.content, secrets, code_url))
                     for a in rendered.artifacts if a.kind == "kubernetes/manifest"
                     and a.content["kind"] in ("Secret", "ConfigMap")]
            try:
                created = custom.create_namespaced_custom_object(group, version, ns, plural, wanted)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                created = self._get_job(custom, wanted["kind"], ns, name)  # a submit of the same job raced this one
                self._attach(created, wanted, spec, target)
            self._own(core, owned, created)
        except ApiException as exc:
            raise _api_error(exc, f"creating {wanted['kind']} {ns}/{name}") from None
        self.store.remember(self.handle(f"{ns}/{name}"), target)
        return f"{ns}/{name}"

    def _filled(self, rendered: Rendered, obj: dict, secrets: Dict[str, str], code_url: Optional[str]) -> dict:
        """A rendered Secret or ConfigMap with what submit alone knows: the secrets' values, the
        code archive's bytes, the stored archive's time-limited URL."""
        if m.is_code_url_secret(obj):
            return m.with_code_url(obj, code_url)
        return m.with_code(rendered.job, self._with_secrets(obj, secrets))

    @staticmethod
    def _with_secrets(obj: dict, secrets: Dict[str, str]) -> dict:
        if obj["kind"] != "Secret":
            return obj
        missing = sorted(k for k in obj.get("stringData", {}) if k not in secrets)
        if missing:
            raise BadInput(f"secret {missing[0]} has no value; set it where the job file's `secrets` says")
        return {**obj, "stringData": {k: secrets[k] for k in obj["stringData"]}}

    @staticmethod
    def _create_core(core, obj: dict) -> dict:
        from kubernetes.client.exceptions import ApiException
        ns, name = _ns_name(obj)
        create = core.create_namespaced_secret if obj["kind"] == "Secret" else core.create_namespaced_config_map
        replace = core.replace_namespaced_secret if obj["kind"] == "Secret" else core.replace_namespaced_config_map
        try:
            create(ns, obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
            replace(name, ns, obj)  # left over from an earlier job of this name: take it over
        return obj

    @staticmethod
    def _own(core, owned: List[dict], job: dict) -> None:
        """Make the job the owner of its Secret and ConfigMap: deleting it deletes them."""
        ref = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": job["metadata"]["name"],
               "uid": job["metadata"].get("uid"), "blockOwnerDeletion": False}
        if not ref["uid"]:
            return
        for obj in owned:
            patch = {"metadata": {"ownerReferences": [ref]}}
            ns, name = _ns_name(obj)
            if obj["kind"] == "Secret":
                core.patch_namespaced_secret(name, ns, patch)
            else:
                core.patch_namespaced_config_map(name, ns, patch)

    def _attach(self, existing: Optional[dict], wanted: dict, spec: str, target: Dict[str, Any]) -> str:
        """Follow ``existing``, the job of ``wanted``'s name, if it has spec hash ``spec``."""
        ns, name = _ns_name(wanted)
        if existing is None:
            raise PlatformError(f"{wanted['kind']} {name} vanished while it was being created; submit again")
        have = (existing.get("metadata", {}).get("annotations") or {}).get(m.ANNOTATION_HASH)
        if have != spec:
            raise PlatformError(
                f"a different {wanted['kind']} named {name} already exists in namespace {ns} (spec hash "
                f"{(have or 'none')[:12]} != {spec[:12]}); cancel it first (cloudtrain cancel {self.handle(ns + '/' + name)}) "
                f"or give this job another name (--set name=...)")
        self.store.remember(self.handle(f"{ns}/{name}"), target)
        return f"{ns}/{name}"

    def _get_job(self, custom, kind: str, ns: str, name: str) -> Optional[dict]:
        from kubernetes.client.exceptions import ApiException
        group, version, plural = RESOURCES[kind]
        try:
            return custom.get_namespaced_custom_object(group, version, ns, plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _find(self, job_id: str) -> Tuple[Optional[dict], Dict[str, Any]]:
        """(the job object or None, its target) for ``job_id``: the kind the store remembers, or
        each of ``kinds`` (a job submitted from another machine)."""
        from kubernetes.client.exceptions import ApiException
        ns, _, name = job_id.partition("/")
        if not ns or not name:
            raise BadInput(f"{self.handle(job_id)} is not a {self.name} job id; expected {self.name}://NAMESPACE/NAME")
        target = self._target_of(job_id)
        custom = self._apis(target)[0]
        try:
            for kind in [target["kind"]] if target.get("kind") else self.kinds:
                obj = self._get_job(custom, kind, ns, name)
                if obj is not None:
                    return obj, target
        except ApiException as exc:
            raise _api_error(exc, f"reading {self.handle(job_id)}") from None
        return None, target

    # -- outputs ---------------------------------------------------------------------------------
    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """Copy the job's output claim (``storage.output: pvc://...``) into ``dest`` through a
        short-lived pod of the job's image (``podoutputs``)."""
        from kubernetes.client.exceptions import ApiException
        from . import podoutputs
        described = self._describe(job_id)
        if described.obj is None:
            raise BadInput(f"{self.handle(job_id)} was cancelled: its objects are gone, and with them the name of its "
                           "output claim; read the claim (storage.output) with a pod of your own")
        try:
            return podoutputs.copy_out(self._apis(described.target)[1], described.obj, Path(dest),
                                       poll=min(self.status_poll, 1.0) or 0.05)
        except ApiException as exc:
            raise _api_error(exc, f"copying the output of {self.handle(job_id)}") from None

    # -- following ---------------------------------------------------------------------------
    @abc.abstractmethod
    def job_state(self, obj: dict) -> Tuple[str, str]:
        """(raw state, message) of a job object."""

    def node_count(self, obj: dict) -> Optional[int]:
        return None

    def pod_selector(self, obj: dict) -> str:
        """The label selector of the job's pods."""
        return f"{m.LABEL_JOB}={obj['metadata']['name']}"

    def node_index(self, obj: dict, pod: dict) -> Tuple[int, int]:
        """Sort key giving node order: the role's place, then the pod's index."""
        name = pod["metadata"]["name"]
        role = (pod["metadata"].get("labels") or {}).get(m.LABEL_ROLE, "")
        order = {"master": 0, "launcher": 0, "head": 0, "chief": 0, "ps": 1, "worker": 2}
        tail = re.search(r"-(\d+)$", name)
        return order.get(role, 3), int(tail.group(1)) if tail else 0

    def _describe(self, job_id: str) -> KubeJob:
        from kubernetes.client.exceptions import ApiException
        obj, target = self._find(job_id)
        if obj is None:
            if target.get("cancelled"):
                return KubeJob(None, target)
            raise JobNotFound(f"no {self.name} job {job_id} in the cluster; cloudtrain list -p {self.name} shows the jobs there")
        described = KubeJob(obj, target)
        if self.map_state(self.job_state(obj)[0]) is State.FAILED:
            try:
                described.exit_code = self._failed_exit_code(self._apis(target)[1], obj)
            except ApiException as exc:
                raise _api_error(exc, f"reading the pods of {self.handle(job_id)}") from None
        return described

    def _to_status(self, job_id: str, described: KubeJob) -> JobStatus:
        obj = described.obj
        if obj is None:
            return JobStatus(self.handle(job_id), State.CANCELLED, "Deleted", job_id.partition("/")[2],
                             message="cancelled (deleted)", exit_code=State.CANCELLED.exit_code)
        raw, message = self.job_state(obj)
        state = self.map_state(raw)
        status = JobStatus(self.handle(job_id), state, raw, obj["metadata"]["name"], message=message,
                           nodes=self.node_count(obj), created_at=timestamp(obj["metadata"].get("creationTimestamp")))
        if state is State.FAILED and described.exit_code is not None:
            status.exit_code = described.exit_code
            status.message = (status.message + "; " if status.message else "") + code_note(described.exit_code)
        elif state.terminal:
            status.exit_code = state.exit_code
        return status

    def _failed_exit_code(self, core, obj: dict) -> Optional[int]:
        for pod in self._pods(core, obj):
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                term = ((cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated"))
                if term and term.get("exitCode"):
                    return int(term["exitCode"])
        return None

    def _pods(self, core, obj: dict) -> List[dict]:
        """The job's pods as dicts, in node order."""
        import json
        resp = core.list_namespaced_pod(obj["metadata"]["namespace"], label_selector=self.pod_selector(obj),
                                        _preload_content=False)
        items = json.loads(resp.data).get("items", [])  # plain dicts: only a few fields are read
        return sorted(items, key=lambda p: self.node_index(obj, p))

    def _log_chunks(self, job_id: str, described: KubeJob, cursor: Dict[str, Any], final: bool) -> Iterator[str]:
        """Each pod's log, prefixed with its node: read whole when the job has ended before it
        was followed (or without ``follow``); otherwise streamed, a stream per pod that started."""
        if described.obj is None:  # deleted by cancel: its pods and their logs went with it
            return
        core = self._apis(described.target)[1]
        pods = self._pods(core, described.obj)
        if final and "streams" not in cursor:
            for index, pod in enumerate(pods):
                yield from podlogs.pod_lines(core, pod, index, False, _api_error)
            return
        streams = cursor.setdefault("streams", podlogs.PodStreams(core, _api_error))
        streams.start(pods)
        yield from streams.take(final, until=time.monotonic() + self.status_poll)

    def _stop(self, job_id: str) -> None:
        """Delete the job (its pods, Secret and ConfigMaps go with it), and remember it was
        cancelled: a deleted job's status is CANCELLED."""
        from kubernetes.client.exceptions import ApiException
        obj, target = self._find(job_id)
        if obj is None:
            return
        group, version, plural = RESOURCES[obj["kind"]]
        ns, name = _ns_name(obj)
        try:
            self._apis(target)[0].delete_namespaced_custom_object(group, version, ns, plural, name,
                                                                  body={"propagationPolicy": "Foreground"})
        except ApiException as exc:
            if exc.status != 404:
                raise _api_error(exc, f"deleting {obj['kind']} {job_id}") from None
        self.store.remember(self.handle(job_id), {**target, "kind": obj["kind"], "cancelled": True})

    def list(self) -> List[JobStatus]:
        selector = f"{m.LABEL_PROVIDER}={self.name}"
        out: List[JobStatus] = []
        for target in self.list_targets():
            out += self._list_one(self._apis(target)[0], selector)
        return sorted(out, key=lambda s: s.created_at or 0, reverse=True)

    def _list_one(self, custom, selector: str) -> List[JobStatus]:
        from kubernetes.client.exceptions import ApiException
        out = []
        for kind in self.kinds:
            group, version, plural = RESOURCES[kind]
            try:
                items = custom.list_cluster_custom_object(group, version, plural, label_selector=selector)["items"]
            except ApiException as exc:
                if exc.status == 404:
                    continue  # this operator is not installed
                raise _api_error(exc, f"listing {plural}") from None
            for obj in items:
                raw, message = self.job_state(obj)
                meta = obj["metadata"]
                out.append(JobStatus(self.handle(f"{meta['namespace']}/{meta['name']}"), self.map_state(raw), raw,
                                     meta["name"], message=message, nodes=self.node_count(obj),
                                     created_at=timestamp(meta.get("creationTimestamp"))))
        return out


def no_kubeconfig(path: str) -> None:
    """``MissingCredentials`` when no file of ``path`` (``$KUBECONFIG``: ``:``-separated) exists
    and this is no pod (the kubernetes client would find no cluster and no credentials)."""
    import os
    files = [os.path.expanduser(p) for p in path.split(os.pathsep) if p]
    if any(os.path.exists(f) for f in files):
        return
    where = f"KUBECONFIG={path}: no such file" if os.environ.get("KUBECONFIG") else \
        f"{path}: no such file, KUBECONFIG is not set"
    raise MissingCredentials("Kubernetes", f"{where}, the in-cluster service account: not in a pod",
                             "export KUBECONFIG=PATH of your cluster's kubeconfig (or write it to ~/.kube/config); "
                             "`kubectl config current-context` checks it")


def _in_cluster() -> bool:
    import os
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG") and \
        not os.path.exists(os.path.expanduser("~/.kube/config"))


def code_note(code: int) -> str:
    return f"a container exited with code {code}" + (" (killed: out of memory?)" if code == 137 else "")


class KubeflowProvider(KubernetesProvider):
    """Kubeflow's jobs: training-operator v1 kinds here; a ``TrainJob`` (Trainer v2, see
    ``KubeflowTrainerProvider``) is followed by its own state table and pod labels, so that
    ``eks`` reaches either API through this one class."""

    name = "kubeflow"
    description = "Kubeflow PyTorchJob / MPIJob / TFJob on any cluster (kubeconfig)"
    Options = KubeflowOptions

    def check(self, job: JobSpec, options: PodOptions) -> None:
        """Kueue takes the queue and the priority class as label values (``kueue_labels``);
        ``max_restarts`` only where the whole job restarts (``m.WHOLE_JOB_RESTARTS``)."""
        trainer = isinstance(options, TrainerOptions) and getattr(options, "api", "trainer") == "trainer"
        if job.max_restarts > 0 and not trainer and job.distribution.type not in m.WHOLE_JOB_RESTARTS:
            raise self.job_error(job, ("max_restarts",), (
                f"{self.name} restarts only the failed pod (training-operator pkg/controller.v1/common/pod.go "
                f"ReconcilePods), which a restarted {job.distribution.type} pod cannot rejoin: the job would hang "
                "instead of restarting; whole-job restarts there are for ddp (torchrun's elastic agent) and "
                "mpi/horovod (the MPIJob's launcher runs mpirun again); set max_restarts: 0, or use volcano"))
        for option in ("queue", "priority_class"):
            problem = names.label_value(getattr(options, option) or "")
            if problem:
                raise self.job_error(job, ("providers", self.name, option), f"{problem} (Kueue reads it from the "
                                     f"label {m.KUEUE_QUEUE if option == 'queue' else m.KUEUE_PRIORITY})")
        super().check(job, options)
    platform = "kubeflow"
    kinds = ("PyTorchJob", "MPIJob", "TFJob")
    # The training operator's condition types (the last true one is the job's state); a
    # suspended job is one Kueue holds (queued) or one suspended by hand.
    states = {"Pending": State.PENDING, "Created": State.PENDING, "Suspended": State.PENDING,
              "Running": State.RUNNING, "Restarting": State.STARTING,
              "Succeeded": State.SUCCEEDED, "Failed": State.FAILED, **trainjob.STATES}

    def manifests(self, job, options):
        return m.build_kubeflow(job, self.manifest_options(job, options))

    def job_state(self, obj: dict) -> Tuple[str, str]:
        if obj["kind"] == "TrainJob":
            return trainjob.job_state(obj)
        conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
        if not conditions:
            return "Pending", "waiting for the operator"
        last = conditions[-1]
        if last["type"] == "Suspended":
            return "Suspended", trainjob.queued_message(obj)
        return last["type"], last.get("message") or last.get("reason") or ""

    def pod_selector(self, obj: dict) -> str:
        if obj["kind"] == "TrainJob":
            return trainjob.pod_selector(obj["metadata"]["name"])
        return super().pod_selector(obj)

    def node_index(self, obj: dict, pod: dict) -> Tuple[int, int]:
        if obj["kind"] == "TrainJob":
            return trainjob.node_order(pod)
        return super().node_index(obj, pod)

    def node_count(self, obj: dict) -> Optional[int]:
        if obj["kind"] == "TrainJob":
            return trainjob.node_count(obj)
        spec = obj.get("spec") or {}
        specs = spec.get("pytorchReplicaSpecs") or spec.get("tfReplicaSpecs") or {}
        if obj["kind"] == "MPIJob":
            specs = {"Worker": (spec.get("mpiReplicaSpecs") or {}).get("Worker", {})}
        return sum(int(s.get("replicas", 1)) for s in specs.values()) or None


class VolcanoProvider(KubernetesProvider):
    name = "volcano"
    description = "Volcano Jobs (batch.volcano.sh) on any cluster (kubeconfig)"
    platform = "volcano"
    Options = VolcanoOptions
    kinds = ("Job",)
    # Volcano job phases.  Aborted: a pod failed under the AbortJob policy (no restarts left).
    states = {"Pending": State.PENDING, "Running": State.RUNNING, "Restarting": State.STARTING,
              "Completing": State.RUNNING, "Completed": State.SUCCEEDED,
              "Aborting": State.RUNNING, "Aborted": State.FAILED, "Failed": State.FAILED,
              "Terminating": State.RUNNING, "Terminated": State.CANCELLED}

    def manifest_options(self, job, options: VolcanoOptions):
        mopts = super().manifest_options(job, options)
        from dataclasses import replace
        return replace(mopts, scheduler_name=options.scheduler_name, volcano_plugins=dict(options.plugins))

    def manifests(self, job, options):
        return m.build_volcano(job, self.manifest_options(job, options))

    def job_state(self, obj: dict) -> Tuple[str, str]:
        state = (obj.get("status") or {}).get("state") or {}
        return state.get("phase") or "Pending", state.get("message") or state.get("reason") or ""

    def node_count(self, obj: dict) -> Optional[int]:
        return sum(int(t.get("replicas", 0)) for t in (obj.get("spec") or {}).get("tasks", [])) or None


class TrainerOptions(BaseModel):
    """Which Kubeflow Trainer runtime a TrainJob runs on (``kubeflow-trainer``; ``eks`` with ``api: trainer``)."""

    runtime: Optional[str] = Field(None, description="the training runtime (default: torch-distributed for ddp and none, deepspeed-distributed for deepspeed; required for mpi, horovod, ps-worker and ray)")
    runtime_kind: Literal["ClusterTrainingRuntime", "TrainingRuntime"] = Field("ClusterTrainingRuntime", description="ClusterTrainingRuntime (cluster-wide) or TrainingRuntime (in the job's namespace)")
    replicated_jobs: Optional[List[str]] = Field(None, description="the runtime's replicated jobs that run nodes, which get cloudtrain's volumes and scheduling settings (default: node; launcher and node for deepspeed-distributed, mpi and horovod)")


class KubeflowTrainerOptions(TrainerOptions, KubeOptions):
    """A TrainJob on a cluster reached through a kubeconfig."""


def trainer_runtime(provider: KubernetesProvider, job: JobSpec, options: TrainerOptions) -> trainjob.Runtime:
    """The job's runtime, or a ``JobFileError`` at ``distribution.type`` when it has none (at
    ``max_restarts`` when restarts are asked for: ``trainjob.NO_RESTARTS``)."""
    if job.max_restarts > 0:
        raise provider.job_error(job, ("max_restarts",), f"{provider.name}: {trainjob.NO_RESTARTS}")
    try:
        return trainjob.runtime_for(job, options.runtime, options.runtime_kind, options.replicated_jobs)
    except trainjob.NoRuntime as exc:
        message = f"{provider.name}: {exc}"
        raise (job.source.error(message, ("distribution", "type")) if job.source
               else JobFileError(message, field="distribution.type")) from None


def trainer_check(provider: KubernetesProvider, job: JobSpec, options) -> None:
    """A TrainJob's runtime is there; its queue is Kueue's (a TrainJob has no schedulingPolicy:
    a runtime's podGroupPolicy gang-schedules it)."""
    if getattr(options, "queue_scheduler", "kueue") != "kueue":
        raise provider.job_error(job, ("providers", provider.name, "queue_scheduler"),
                                 "a TrainJob is queued by Kueue only (it has no schedulingPolicy; a training runtime's "
                                 "podGroupPolicy gang-schedules it); use queue_scheduler: kueue")
    trainer_runtime(provider, job, options)


def trainer_manifest_options(mopts: m.ManifestOptions) -> m.ManifestOptions:
    """The launcher bundle carries the TrainJob detector (and the Kubeflow one it builds on)."""
    from dataclasses import replace
    return replace(mopts, detector_targets=("cloudtrain_kubernetes.detect:detect_kubeflow", trainjob.DETECTOR))


class KubeflowTrainerProvider(KubeflowProvider):
    name = trainjob.PLATFORM
    description = "Kubeflow Trainer v2 TrainJob on any cluster (kubeconfig)"
    platform = trainjob.PLATFORM
    Options = KubeflowTrainerOptions
    kinds = ("TrainJob",)

    def check(self, job: JobSpec, options: KubeflowTrainerOptions) -> None:
        super().check(job, options)
        trainer_check(self, job, options)

    def manifest_options(self, job: JobSpec, options: KubeflowTrainerOptions) -> m.ManifestOptions:
        return trainer_manifest_options(super().manifest_options(job, options))

    def manifests(self, job, options: KubeflowTrainerOptions):
        return trainjob.build_trainjob(job, self.manifest_options(job, options), trainer_runtime(self, job, options))

    @classmethod
    def default_cluster(cls, job: JobSpec) -> Cluster:
        return Cluster(hosts=[f"{job.name}-node-0-{i}.{job.name}" for i in range(job.distribution.nodes)],
                       master_port=trainjob.TRAINER_PORT)
