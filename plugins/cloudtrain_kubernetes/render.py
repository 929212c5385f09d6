"""What a Kubernetes provider renders (pure: no SDK, no network, no clock): the typed request
``KubeRequest`` and the functions that build it from (job, options).  The objects themselves are
built by ``manifests`` (Kubeflow's training-operator jobs, Volcano's Job, the Secret and the
ConfigMaps every job has) and ``trainjob`` (Kubeflow Trainer v2's TrainJob).

``KubeRequest``: the job object (``workload``, created last and made the owner of the rest), the
launcher's ConfigMap, the job's Secret (``***`` values: a submit puts the real ones in) and the
code, one of:

- ``InlineCode``: the code ConfigMap (the archive's size and digest in place of its bytes; a
  submit puts the bytes in) when the archive fits (``manifests.INLINE_CODE_LIMIT``);
- ``StoredCode``: the archive goes to an object store (``providers.<p>.code_store``) at
  ``<prefix>/cloudtrain-code/<sha256>.tar.gz`` (its ``code_upload``: core ships it, once), and
  the pods read it through a time-limited GET URL in the Secret ``<name>-code-url``, which a
  submit makes from where core shipped it (``Placeholder.CODE_URL``, filled in);
- None: ``code: null`` (the image holds the code).

``code_shipping: auto`` (the default) puts an archive of at most ``INLINE_CODE_LIMIT`` in the
ConfigMap and a larger one in the store; ``configmap`` / ``store`` force one way.  Too large with
no store is exit 2 naming ``code_store``; a store whose plugin or SDK is missing is exit 2 naming
the ``pip install``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Tuple, Union

from cloudtrain.spec.errors import BadInput, JobFileError
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.request import Artifact, CodeUpload, Placeholder, Request

from . import manifests as m
from . import trainjob

if TYPE_CHECKING:
    from typing import Protocol

    from .options import PodOptions, TrainerOptions

    class KubernetesProvider(Protocol):
        """What the builders read of the provider they render for (``provider.KubernetesProvider``
        has it): render knows no provider class, only this."""

        @property
        def name(self) -> str: ...

        @property
        def code_store_schemes(self) -> Tuple[str, ...]: ...

        def job_error(self, job: JobSpec, loc: tuple, message: str) -> JobFileError: ...

# S3's SigV4 presigned URLs last at most 7 days (X-Amz-Expires <= 604800): long enough for a
# job that waits in a queue, and the default.
MAX_URL_SECONDS = 7 * 24 * 3600
EXAMPLES = {"s3": "s3://my-bucket/cloudtrain", "obs": "obs://my-bucket/cloudtrain"}
MANIFEST = "kubernetes/manifest"


# -- the typed request --------------------------------------------------------------------------
@dataclass(frozen=True)
class InlineCode:
    """The code inside the request: ``configmap`` shows the archive's size and digest
    (``payload.placeholder``) where a submit puts its bytes."""

    configmap: dict
    payload: m.CodePayload


@dataclass(frozen=True)
class StoredCode:
    """The code in an object store: ``upload`` says where core ships it (``payload.url``: the
    digest in its name); ``secret`` (``***`` in the render) gets a GET URL of it that lasts
    ``expires`` seconds, made at submit from ``shipped`` (``Placeholder.CODE_URL`` filled in)."""

    secret: dict
    payload: m.CodePayload
    upload: CodeUpload
    expires: int
    shipped: str = Placeholder.CODE_URL

    def artifact(self) -> Artifact:
        """What the render shows of the upload (``s3/PutObject``, ``obs/PutObject``)."""
        from cloudtrain.transfer.objectstore import ObjectUrl
        if self.payload.url is None:  # kube_request makes a StoredCode only of a payload with a URL
            raise ValueError("stored code without the URL of its archive")
        url = ObjectUrl.parse(self.payload.url)
        return Artifact(f"{url.scheme}/PutObject", "code", {"Bucket": url.bucket, "Key": url.key,
                                                             "ContentType": "application/gzip"})


@dataclass(frozen=True)
class KubeRequest(Request):
    """A Kubernetes job as the objects a submit creates: ``secret``, ``launcher``, the code's
    object, then ``workload`` (the job object, one of the provider's kinds)."""

    workload: dict
    launcher: dict
    secret: Optional[dict] = None
    code: Union[InlineCode, StoredCode, None] = None

    @property
    def spec_hash(self) -> str:
        """The job object's ``cloudtrain.io/spec-hash`` annotation: stamped over the object (the
        code's digest included) and kept by the cluster with the job."""
        return self.workload["metadata"]["annotations"][m.ANNOTATION_HASH]

    @property
    def code_upload(self) -> Optional[CodeUpload]:
        return self.code.upload if isinstance(self.code, StoredCode) else None

    def objects(self) -> List[dict]:
        """Every object, in the order a submit creates them."""
        code = self.code.configmap if isinstance(self.code, InlineCode) else \
            self.code.secret if isinstance(self.code, StoredCode) else None
        return [o for o in (self.secret, self.launcher, code, self.workload) if o is not None]

    def artifacts(self) -> List[Artifact]:
        upload = [self.code.artifact()] if isinstance(self.code, StoredCode) else []
        return upload + [Artifact(MANIFEST, f"{o['kind']}/{o['metadata']['name']}", o) for o in self.objects()]


def kube_request(job: JobSpec, mopts: m.ManifestOptions, objects: List[dict],
                 store: Mapping[str, Optional[str]], expires: Optional[int]) -> KubeRequest:
    """The request of ``objects`` (a builder's: the job's Secret and ConfigMaps, the job object
    last), each in its place by the name the builder gave it; ``store``: the code store's
    ``region`` and ``endpoint``; ``expires``: how long the pods' URL of a stored archive lasts."""
    *owned, workload = objects
    by_name = {o["metadata"]["name"]: o for o in owned}
    secret = by_name.pop(m.secret_name(job, mopts), None)
    launcher = by_name.pop(m.launcher_configmap_name(job, mopts))
    code: Union[InlineCode, StoredCode, None] = None
    if mopts.code is not None and mopts.code.inline:
        code = InlineCode(by_name.pop(m.code_configmap_name(job, mopts)), mopts.code)
    elif mopts.code is not None and mopts.code.url is not None:  # not inline: the store holds it there
        upload = CodeUpload(mopts.code.url, region=store.get("region"), endpoint=store.get("endpoint"))
        code = StoredCode(by_name.pop(m.code_url_secret_name(job, mopts)), mopts.code, upload,
                          expires or MAX_URL_SECONDS)
    if by_name:
        raise ValueError(f"objects the Kubernetes request has no place for: {sorted(by_name)}")
    return KubeRequest(workload, launcher, secret, code)


# -- the options of the builders ----------------------------------------------------------------
POD_FIELDS = ("namespace", "name", "image", "image_pull_policy", "image_pull_secrets", "service_account",
              "node_selector", "tolerations", "labels", "pod_annotations", "python", "workdir", "master_port",
              "shm_gb", "gpu_resource", "rdma_resource", "rdma_count", "rdma_env", "queue", "priority_class")


def manifest_options(job: JobSpec, options: "PodOptions", **settings: Any) -> m.ManifestOptions:
    """``manifests.ManifestOptions`` from the pods' options (the spot nodes' labels and taints
    with ``spot: true``) and the provider's ``settings`` (provider, platform, gpu_selection,
    detector_targets, code)."""
    fields = {k: getattr(options, k) for k in POD_FIELDS}
    fields["queue_scheduler"] = getattr(options, "queue_scheduler", "kueue")
    if job.spot:  # the cluster says which nodes are spot: its labels and taints
        fields["node_selector"] = {**options.spot_node_selector, **options.node_selector}
        fields["tolerations"] = [*options.tolerations, *options.spot_tolerations]
    return m.ManifestOptions.of({**fields, **settings})


def sized(job: JobSpec, provider: str) -> JobSpec:
    """``resources.instance_type`` on a cluster whose nodes cloudtrain does not choose by type:
    as docs/job-file.md says, its accelerator and count, from the installed catalog that lists it
    (exit 2 when none does), said in a warning.  A cluster's nodes are whatever the cluster has:
    the type's own label (``node.kubernetes.io/instance-type``) is the user's to pin through
    ``node_selector``."""
    r = job.resources
    if not r.instance_type:
        return job
    import warnings
    from cloudtrain.catalogs.catalog import Catalog
    from cloudtrain.spec.errors import CloudtrainWarning
    from cloudtrain.catalogs.instances import InstanceRules, wanted
    found = wanted(job, InstanceRules(provider, lambda: Catalog(provider, [])))
    if found is None:  # wanted names the accelerator of an instance_type, or exits 2
        raise ValueError(f"resources.instance_type {r.instance_type}: no accelerator found")
    accelerator, count = found
    warnings.warn(f"resources.instance_type {r.instance_type}: {provider} does not choose a cluster's nodes by "
                  f"type; its pods ask for its {accelerator} x {count} instead (resources.accelerator, "
                  f"gpus_per_node); to pin the type too, set providers.{provider}.node_selector "
                  f"{{node.kubernetes.io/instance-type: {r.instance_type}}}", CloudtrainWarning, stacklevel=3)
    resources = r.model_copy(update={"accelerator": accelerator, "gpus_per_node": count, "instance_type": None})
    return job.model_copy(update={"resources": resources})


# -- the code: in the request, or through an object store ---------------------------------------
def example(provider: "KubernetesProvider") -> str:
    scheme = provider.code_store_schemes[0]
    return EXAMPLES.get(scheme, f"{scheme}://my-bucket/cloudtrain")


def code_payload(provider: "KubernetesProvider", job: JobSpec, options: "PodOptions") -> Optional[m.CodePayload]:
    """The job's archive and where it travels (None with ``code: null``); exit 2 when it cannot."""
    if job.code is None:
        return None
    from cloudtrain.transfer import shipping
    try:
        data = shipping.code_archive(job)
    except FileNotFoundError:
        raise provider.job_error(job, ("code",), f"the code directory {job.code_path} does not exist; fix `code` "
                                                 "(relative to the job file)") from None
    sha256 = data.sha256
    fits = len(data) <= m.INLINE_CODE_LIMIT
    how = options.code_shipping
    if how == "configmap" or (how == "auto" and fits):
        if not fits:
            raise too_large(provider, job, len(data), forced=True)
        return m.CodePayload(sha256, len(data))
    if not options.code_store:
        if how == "store":
            raise provider.job_error(job, ("providers", provider.name, "code_shipping"),
                                     f"is store, but providers.{provider.name}.code_store is not set; set it to an "
                                     f"object store the pods can reach, e.g. {example(provider)}")
        raise too_large(provider, job, len(data))
    prefix = store_prefix(provider, job, options)
    from cloudtrain.transfer.objectstore import code_url
    return m.CodePayload(sha256, len(data), str(code_url(prefix, data)))


def too_large(provider: "KubernetesProvider", job: JobSpec, size: int, forced: bool = False) -> BadInput:
    name = provider.name
    way = (f"set providers.{name}.code_shipping to auto (the default) with providers.{name}.code_store"
           if forced else f"set providers.{name}.code_store to an object store the pods can reach "
                          f"(e.g. {example(provider)}) and the archive is uploaded there")
    return provider.job_error(job, ("code",),
        f"the code archive of {job.code_path} is {size / 1024:.0f} KiB packed; a Kubernetes ConfigMap carries at most "
        f"{m.INLINE_CODE_LIMIT // 1024} KiB here (the API server's limit is 1 MiB); {way}, leave files out with a "
        ".cloudtrainignore, or build the code into the image and set code: null")


def store_prefix(provider: "KubernetesProvider", job: JobSpec, options: "PodOptions"):
    """``code_store`` parsed, its scheme one this provider's pods fetch from, its store (plugin
    and SDK) installed: all offline."""
    from cloudtrain.transfer.objectstore import ObjectUrl, usable_store_class
    loc = ("providers", provider.name, "code_store")
    if not options.code_store:  # code_payload asks only with one set
        raise provider.job_error(job, loc, f"is not set; set it to an object store the pods can reach, e.g. "
                                           f"{example(provider)}")
    try:
        prefix = ObjectUrl.parse(options.code_store, f"providers.{provider.name}.code_store")
    except BadInput as exc:
        raise provider.job_error(job, loc, str(exc)) from None
    if prefix.scheme not in provider.code_store_schemes:
        takes = ", ".join(f"{s}://" for s in provider.code_store_schemes)
        raise provider.job_error(job, loc, f"{options.code_store} is a {prefix.scheme}:// store; {provider.name} ships "
                                           f"code through {takes} stores: use one, e.g. {example(provider)}")
    try:
        usable_store_class(prefix.scheme)
    except BadInput as exc:
        raise provider.job_error(job, loc, str(exc)) from None
    return prefix


# -- Kubeflow Trainer v2 (kubeflow-trainer; eks with api: trainer) ------------------------------
def trainer_runtime(provider: "KubernetesProvider", job: JobSpec, options: "TrainerOptions") -> trainjob.Runtime:
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


def trainer_check(provider: "KubernetesProvider", job: JobSpec, options) -> None:
    """A TrainJob's runtime is there; its queue is Kueue's (a TrainJob has no schedulingPolicy:
    a runtime's podGroupPolicy gang-schedules it)."""
    if getattr(options, "queue_scheduler", "kueue") != "kueue":
        raise provider.job_error(job, ("providers", provider.name, "queue_scheduler"),
                                 "a TrainJob is queued by Kueue only (it has no schedulingPolicy; a training runtime's "
                                 "podGroupPolicy gang-schedules it); use queue_scheduler: kueue")
    trainer_runtime(provider, job, options)


def trainer_manifest_options(mopts: m.ManifestOptions) -> m.ManifestOptions:
    """The launcher bundle carries the TrainJob detector (and the Kubeflow one it builds on)."""
    return dataclasses.replace(mopts, detector_targets=("cloudtrain_kubernetes.detect:detect_kubeflow",
                                                        trainjob.DETECTOR), jobset=True)


def trainer_objects(provider: "KubernetesProvider", job: JobSpec, options: "TrainerOptions",
                    mopts: m.ManifestOptions) -> List[dict]:
    """A TrainJob's objects (``trainjob.build_trainjob``) on the job's runtime."""
    return trainjob.build_trainjob(job, mopts, trainer_runtime(provider, job, options))

