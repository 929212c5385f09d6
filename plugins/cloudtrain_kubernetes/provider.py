"""``kubeflow``, ``volcano`` and ``kubeflow-trainer``: a job as Kubernetes objects, sent with the
official client.

``KubernetesProvider`` is a ``cloudtrain.providers.cloud.CloudProvider`` and the shared base of every
Kubernetes provider (also ``eks`` and ``modelarts-lite``); it holds the lifecycle only: what a
job is made of is ``render`` (the typed ``KubeRequest``), its settings ``options``, the client
and the one error translator ``sdk``.  ``submit`` (core's one pipeline): the stored code shipped
(``KubeRequest.code_upload``), then the request's objects are created in order -- the job's
Secret (with the real values) and ConfigMaps, the code's object (its bytes, or a time-limited URL
of the shipped archive), the job object, then the job is made their owner so deleting it removes
them.  A job's id is ``<namespace>/<name>``; the job object carries the ``cloudtrain.io/spec-hash``
annotation the render stamps: an existing job of the same name and hash is followed, one with
another hash is an error that says how to proceed.  ``status`` reads the job object (the pods
too, for a failed job's exit code), ``logs`` streams each pod's log (``podlogs``), ``cancel``
deletes the job.

A provider built on it overrides only these (docs/plugins.md, "Kubernetes providers"):

- ``platform``, ``kinds``, ``states``, ``Options``: the launcher's platform (the pods run
  ``cloudtrain launch --platform <platform>`` with its detector in the launcher bundle), the job
  kinds it creates, their state table, its options (a ``PodOptions`` subclass);
- ``manifest_options(job, options)``: ``super()``, then ``dataclasses.replace`` what the
  platform does differently; ``gpu_selection(job, options)``: the node label of the GPU model;
- ``manifests(job, options)``: the objects to create (pure); ``check(job, options)``;
- ``code_store_schemes``, ``code_store_settings(options)``: the object stores its pods fetch
  stored code from, and the store's region and endpoint;
- ``target(options)`` / ``target_keys`` / ``connect(target)`` / ``list_targets()``: how to reach
  the cluster (a kubeconfig here; ``eks``: a token from STS, ``modelarts-lite``: a certificate
  from CCE); ``target`` is what the store keeps so that ``status HANDLE`` reaches the cluster
  again from any shell, ``api_client(target)`` the client made once per cluster;
- ``job_state(obj)``, ``node_count(obj)``, ``pod_selector(obj)``, ``node_index(obj, pod)``: how
  to read a job object and find its pods in node order.
"""
from __future__ import annotations

import functools

import abc
import re
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Dict, Generic, Iterator, List, Optional, Tuple, Type, TypeVar

from cloudtrain.providers.cloud import CloudProvider, timestamp
from cloudtrain.spec.errors import BadInput, CloudtrainWarning, JobNotFound, PlatformError
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.provider import Cluster, JobStatus, NodeExec, Rendered, State
from cloudtrain.providers.request import Placeholder
from cloudtrain.providers.survival import checkpoint_uri, field_error
from cloudtrain.orchestrate.failures import CAPACITY, NODE_FAILURE, PREEMPTION

from . import manifests as m
from . import names, podlogs, rayjob, render, sdk, trainjob
from .options import (KubeflowOptions, KubeflowTrainerOptions, KubeOptions, PodOptions, QueueSchedulerOption,
                      TrainerOptions, VolcanoOptions)
from .render import InlineCode, KubeRequest, StoredCode

# kind -> (group, version, plural)
RESOURCES = {
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "MPIJob": ("kubeflow.org", "v2beta1", "mpijobs"),
    "TFJob": ("kubeflow.org", "v1", "tfjobs"),
    "Job": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "TrainJob": trainjob.RESOURCE,
    "RayJob": rayjob.RESOURCE,
}
KUEUE_GROUP = "kueue.x-k8s.io"
# the options models, importable from here as before the split (eks, modelarts-lite build on them)
__all__ = ["KubernetesProvider", "KubeflowProvider", "VolcanoProvider", "KubeflowTrainerProvider", "KubeJob",
           "RESOURCES", "PodOptions", "KubeOptions", "QueueSchedulerOption", "KubeflowOptions", "VolcanoOptions",
           "TrainerOptions", "KubeflowTrainerOptions"]


# A provider's options model: every method that takes the options takes this one type, so that a
# provider built on another (eks on kubeflow, modelarts-lite on volcano) names its own options.
OptionsT = TypeVar("OptionsT", bound=PodOptions)
VolcanoOptionsT = TypeVar("VolcanoOptionsT", bound=VolcanoOptions)


@dataclass
class KubeJob:
    """One read of a job (``_describe``): its object (None once ``cancel`` deleted it), the
    cluster it is on, and for a failed job the first non-zero exit code of its pods."""

    obj: Optional[dict]
    target: Dict[str, Any]
    exit_code: Optional[int] = None


class KubernetesProvider(CloudProvider, Generic[OptionsT]):
    """The shared lifecycle of every provider whose job is a set of Kubernetes objects; what a
    provider built on it overrides is listed in the module's docstring (and docs/plugins.md).
    ``OptionsT``: the provider's options (its ``Options``), which its methods take."""

    extra = "kubernetes"
    sdk_modules: ClassVar[Tuple[str, ...]] = ("kubernetes",)
    Options: ClassVar[Type[PodOptions]] = KubeOptions
    # one log per pod, each line prefixed [node<i>] (podlogs.py): `cloudtrain logs --node` picks one
    log_selectors = frozenset({"node"})
    log_merged = "its pod logs tell the node ([node<i>]) but neither a rank nor the time of a line"
    # The kinds of job object this provider creates and looks for (keys of RESOURCES).
    kinds: ClassVar[Tuple[str, ...]] = ()
    # The keys of ``target()`` that tell one cluster from another (one API client each).
    target_keys: ClassVar[Tuple[str, ...]] = ("kubeconfig", "context")
    storage_schemes: ClassVar[Tuple[str, ...]] = ("pvc",)  # PersistentVolumeClaims: pvc://CLAIM[/PATH]
    code_optional = True  # code: null: no code ConfigMap, the pods run in the image's workdir
    status_poll = 2.0  # an API server's reads are cheap
    # The schemes of providers.<name>.code_store whose time-limited URLs this provider's pods fetch.
    code_store_schemes: ClassVar[Tuple[str, ...]] = ("s3",)
    # Every provider built on this class (kubeflow, kubeflow-trainer, volcano, eks, modelarts-lite)
    # reads its pods' words: the pod condition DisruptionTarget (k8s.io/api/core/v1 types.go,
    # DisruptionTarget: PreemptionByScheduler, DeletionByTaintManager, EvictionByEvictionAPI,
    # DeletionByPodGC, TerminationByKubelet).
    failure_words: ClassVar[Tuple[Tuple[str, str], ...]] = (
        (r"DisruptionTarget|PreemptionByScheduler|EvictionByEvictionAPI", PREEMPTION),
        (r"DeletionByTaintManager|DeletionByPodGC|TerminationByKubelet|NodeLost", NODE_FAILURE),
        (r"FailedScheduling|Insufficient (?:cpu|memory|nvidia)", CAPACITY))

    def __init__(self, api_client=None, store=None, poll: Optional[float] = None):
        """``api_client``: a ``kubernetes.client.ApiClient`` used for every cluster (tests);
        ``store``: where the cluster of each submitted job is remembered (default: the user's);
        ``poll``: seconds between reads while a job is followed or waited for."""
        super().__init__(poll=poll)
        self._api_client = api_client
        self._clients: Dict[str, Any] = {}
        self._store = store

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """The kubeconfig option's file, else the kubernetes client's own lookup, offline
        (``sdk.offline_credentials``)."""
        from .sdk import offline_credentials
        return offline_credentials(getattr(options, "kubeconfig", None))

    @property
    def no_code_upload(self) -> str:  # type: ignore[override]
        return (f"{self.name} sends the code inside its request (the code ConfigMap) or reads it from the image "
                f"(code: null), unless providers.{self.name}.code_shipping: store (with code_store) uploads it to an "
                "object store")

    # -- rendering (pure: render.py) ---------------------------------------------------------------
    def sized(self, job: JobSpec) -> JobSpec:
        """``render.sized`` on a cluster whose nodes cloudtrain does not choose by type (no catalog:
        ``instance_rules()`` None)."""
        return job if self.instance_rules() is not None else render.sized(job, self.name)

    def validate(self, job: JobSpec, *, submit: bool = False, policy=()):
        return super().validate(self.sized(job), submit=submit, policy=policy)

    def render(self, job: JobSpec, *, submit: bool = False, policy=()) -> Rendered:
        return super().render(self.sized(job), submit=submit, policy=policy)

    def render_request(self, job: JobSpec, options: OptionsT) -> KubeRequest:
        return render.kube_request(job, self.manifest_options(job, options), self.manifests(job, options),
                                   self.code_store_settings(options), options.code_url_expires)

    def manifest_options(self, job: JobSpec, options: OptionsT) -> m.ManifestOptions:
        """The options of ``cloudtrain_kubernetes.manifests`` for this job; a platform calls
        ``super()`` and ``dataclasses.replace``s what it does differently."""
        mopts = render.manifest_options(job, options, provider=self.name, platform=self.platform,
                                        gpu_selection=self.gpu_selection(job, options),
                                        detector_targets=self.node_platform().bundle_targets,
                                        code=render.code_payload(self, job, options))
        return replace(mopts, kuberay=True) if rayjob.wanted(job, getattr(options, "ray", None)) else mopts

    def code_store_settings(self, options: OptionsT) -> Dict[str, Any]:
        """The code store's constructor arguments (``region``, ``endpoint``) from the options."""
        return {"endpoint": options.code_store_endpoint}

    def gpu_selection(self, job: JobSpec, options: OptionsT):
        """(label, values) the pods' nodes must have for ``resources.accelerator`` (None: none)."""
        if not isinstance(options, KubeOptions):  # eks selects nodes by instance type instead
            return None
        from .gpu_products import selection
        return selection(job, self.name, options.gpu_label, options.gpu_products)

    @abc.abstractmethod
    def manifests(self, job: JobSpec, options: OptionsT) -> List[dict]:
        """The objects to create, in order (pure): the job's Secret and ConfigMaps, then the job
        object (one of ``kinds``), built from ``manifest_options(job, options)``."""

    def check(self, job: JobSpec, options: OptionsT) -> None:
        checkpoint_uri(job, "a Kubernetes cluster", ("pvc",), "pvc://team-checkpoints/digits (a ReadWriteMany claim)")
        if job.spot and not (options.spot_node_selector or options.spot_tolerations):
            raise field_error(job, ("spot",), f"Kubernetes has no spot field: set providers.{self.name}."
                                              "spot_node_selector (and spot_tolerations if spot nodes are tainted) to "
                                              "your cluster's spot nodes, e.g. {karpenter.sh/capacity-type: spot} "
                                              "(EKS with Karpenter)")
        if not (options.image or job.image):
            raise BadInput(f"{self.where(job)}the job has no image; set `image` (or providers.{self.name}.image) "
                           "to an image that contains the code and Python >= 3.8")
        try:
            m.object_name(job, self.manifest_options(job, options))
        except ValueError as exc:
            if options.name:
                raise self.job_error(job, ("providers", self.name, "name"), f"{exc}") from None
            raise self.job_error(job, ("name",), f"{exc}; rename the job, or give its Kubernetes objects another "
                                 f"name with providers.{self.name}.name (e.g. job-{job.name})") from None

    @staticmethod
    def where(job: JobSpec) -> str:
        return f"{job.source.path}: " if job.source and job.source.path else ""

    # -- the code: in the request, or shipped by core to an object store ----------------------------
    def code_archive(self, rendered: Rendered[KubeRequest]):
        """The code alone (the pods get the launcher from its ConfigMap), as the render saw it: its
        digest is in the pod spec, which the pods check."""
        from cloudtrain.transfer import shipping
        data = shipping.code_archive(rendered.job)
        code = rendered.request.code
        if not isinstance(code, StoredCode) or data.sha256 != code.payload.sha256:
            raise self.code_changed(rendered.job)
        return data, data.sha256

    @staticmethod
    def code_changed(job: JobSpec) -> BadInput:
        return BadInput(f"the code in {job.code_path} changed after the job was rendered; render or submit again")

    def _with_code(self, job: JobSpec, code: InlineCode) -> dict:
        """The code ConfigMap with the archive's bytes (base64, as ``binaryData`` takes them) in
        place of the rendered size and digest."""
        import base64
        from cloudtrain.transfer import shipping
        archive = shipping.code_archive(job)
        if m.CodePayload(archive.sha256, len(archive)).placeholder != code.payload.placeholder:
            raise self.code_changed(job)
        data, cm = archive.read_bytes(), code.configmap
        return {**cm, "binaryData": {**cm["binaryData"], m.CODE_KEY: base64.b64encode(data).decode("ascii")}}

    def _with_code_url(self, code: StoredCode) -> dict:
        """The code URL Secret with a GET URL of the shipped archive, lasting ``code.expires``."""
        if code.shipped == Placeholder.CODE_URL:
            raise ValueError("the code URL Secret has no URL: the code was not uploaded")
        from cloudtrain.transfer.objectstore import ObjectUrl
        url = self.code_store(code.upload).presign(ObjectUrl.parse(code.shipped), code.expires)
        return {**code.secret, "stringData": {m.CODE_URL_KEY: url}}

    @staticmethod
    def _with_secrets(obj: dict, secrets: Dict[str, str]) -> dict:
        missing = sorted(k for k in obj.get("stringData", {}) if k not in secrets)
        if missing:
            raise BadInput(f"secret {missing[0]} has no value; set it where the job file's `secrets` says")
        return {**obj, "stringData": {k: secrets[k] for k in obj["stringData"]}}

    def _owned(self, rendered: Rendered[KubeRequest], secrets: Dict[str, str]) -> List[Tuple[str, dict]]:
        """The (API, object) pairs the job will own, with what submit alone knows: the secrets'
        values, the code archive's bytes or the stored archive's time-limited URL."""
        request = rendered.request
        owned = [(sdk.SECRET, self._with_secrets(request.secret, secrets))] if request.secret is not None else []
        owned.append((sdk.CONFIG_MAP, request.launcher))
        if isinstance(request.code, InlineCode):
            owned.append((sdk.CONFIG_MAP, self._with_code(rendered.job, request.code)))
        elif isinstance(request.code, StoredCode):
            owned.append((sdk.SECRET, self._with_code_url(request.code)))
        return owned

    # -- reaching the cluster ----------------------------------------------------------------
    def target(self, options: OptionsT) -> Dict[str, Any]:
        """What to remember (in the store, at submit) to reach this job's cluster again from
        any shell; never a credential.  Here a kubeconfig's; a provider whose options have none
        (eks) overrides this."""
        if not isinstance(options, KubeOptions):
            raise TypeError(f"{type(self).__name__}: {type(options).__name__} has no kubeconfig; override target()")
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
        return sdk.kubeconfig_client(self.require_sdk("kubernetes"), target)

    def list_targets(self) -> List[Dict[str, Any]]:
        """The clusters ``list`` looks at: here, the kubeconfig's current context."""
        return [{}]

    @property
    def store(self):
        """Where the cluster (``target``) of each submitted job is remembered."""
        if self._store is None:
            from cloudtrain.runtime.store import Store
            self._store = Store()
        return self._store

    def _apis(self, target: Dict[str, Any]):
        return sdk.apis(self.api_client(target))

    def _target_of(self, job_id: str) -> Dict[str, Any]:
        return self.store.recall(self.handle(job_id)) or {}

    # -- submitting (CloudProvider.schedule: ship, fill, _find_by_spec, else _create) ----------
    def _submit_target(self, rendered: Rendered[KubeRequest]) -> Dict[str, Any]:
        return {**self.target(rendered.options), "kind": rendered.request.workload["kind"]}

    def _find_by_spec(self, rendered: Rendered[KubeRequest], spec: str) -> Optional[str]:
        """The job of this name, when it exists: followed if its spec hash is the one the render
        stamped on the job object, refused (with how to proceed) if it is another job's."""
        wanted = rendered.request.workload
        target = self._submit_target(rendered)
        try:
            existing = self._get_job(self._apis(target)[0], wanted["kind"], *sdk.ns_name(wanted))
        except sdk.api_exception() as exc:
            raise sdk.api_error(exc, f"creating {wanted['kind']} {'/'.join(sdk.ns_name(wanted))}") from None
        if existing is None:
            return None
        return self._attach(existing, rendered.request, target)

    def _check_queue_admits(self, wanted: dict, target: Dict[str, Any]) -> None:
        """A job cloudtrain creates suspended (a TrainJob with a queue: ``trainjob.train_job``)
        starts only when Kueue resumes it; on a cluster that serves no ``kueue.x-k8s.io`` API it
        would stay suspended for ever, so nothing is created.  A discovery the credentials may not
        make says nothing either way: the job is created."""
        if not (wanted.get("spec") or {}).get("suspend"):
            return
        groups = sdk.served_groups(self.api_client(target))
        if groups is not None and KUEUE_GROUP not in groups:
            raise PlatformError(f"the cluster serves no {KUEUE_GROUP} API (kubectl api-versions): Kueue is not "
                                f"installed, and a {wanted['kind']} queued with providers.{self.name}.queue starts "
                                f"suspended until Kueue admits it, so it would never start; install Kueue with its "
                                f"{wanted['kind']} integration enabled, or unset providers.{self.name}.queue")

    def _create(self, rendered: Rendered[KubeRequest], secrets: Dict[str, str], spec: str) -> str:
        """The Secret (the real values) and ConfigMaps, the code's object, the job object, then
        the job made their owner (deleting it deletes them)."""
        ApiException = sdk.api_exception()
        wanted = rendered.request.workload
        target = self._submit_target(rendered)
        custom, core = self._apis(target)
        ns, name = sdk.ns_name(wanted)
        group, version, plural = RESOURCES[wanted["kind"]]
        self._check_queue_admits(wanted, target)
        try:
            owned = self._owned(rendered, secrets)
            for api, obj in owned:  # each removed again if a later step fails (CloudProvider.schedule)
                sdk.put(core, api, obj)
                self.made(f"{api.replace('_', '')} {'/'.join(sdk.ns_name(obj))}",
                          functools.partial(sdk.delete_core, core, api, obj))
            try:
                created = sdk.create_custom(custom, RESOURCES[wanted["kind"]], ns, wanted)
                self.made(f"{wanted['kind']} {ns}/{name}", lambda: custom.delete_namespaced_custom_object(
                    group, version, ns, plural, name, body={"propagationPolicy": "Background"}))
            except ApiException as exc:
                if exc.status != 409:
                    raise
                created = self._get_job(custom, wanted["kind"], ns, name)  # a submit of the same job raced this one
                self._attach(created, rendered.request, target)
            sdk.own(core, owned, created)
        except ApiException as exc:
            raise sdk.api_error(exc, f"creating {wanted['kind']} {ns}/{name}") from None
        self.store.remember(self.handle(f"{ns}/{name}"), target)
        return f"{ns}/{name}"

    def _attach(self, existing: Optional[dict], request: KubeRequest, target: Dict[str, Any]) -> str:
        """Follow ``existing``, the job of the request's name, if it has the request's spec hash."""
        wanted, spec = request.workload, request.spec_hash
        ns, name = sdk.ns_name(wanted)
        if existing is None:
            raise PlatformError(f"{wanted['kind']} {name} vanished while it was being created; submit again")
        have = (existing.get("metadata", {}).get("annotations") or {}).get(m.ANNOTATION_HASH)
        if have != spec:
            raise PlatformError(
                f"a different {wanted['kind']} named {name} already exists in namespace {ns} (spec hash "
                f"{(have or 'none')[:12]} != {spec[:12]}); cancel it first (cloudtrain cancel "
                f"{self.handle(ns + '/' + name)}) or give this job another name (--set name=...)")
        self.store.remember(self.handle(f"{ns}/{name}"), target)
        return f"{ns}/{name}"

    @staticmethod
    def _get_job(custom, kind: str, ns: str, name: str) -> Optional[dict]:
        return sdk.get_custom(custom, RESOURCES[kind], ns, name)

    def _find(self, job_id: str) -> Tuple[Optional[dict], Dict[str, Any]]:
        """(the job object or None, its target) for ``job_id``: the kind the store remembers, or
        each of ``kinds`` (a job submitted from another machine)."""
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
        except sdk.api_exception() as exc:
            raise sdk.api_error(exc, f"reading {self.handle(job_id)}") from None
        return None, target

    # -- outputs ---------------------------------------------------------------------------------
    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """Copy the job's output claim (``storage.output: pvc://...``) into ``dest`` through a
        short-lived pod of the job's image (``podoutputs``)."""
        from . import podoutputs
        described = self._describe(job_id)
        if described.obj is None:
            raise BadInput(f"{self.handle(job_id)} was cancelled: its objects are gone, and with them the name of its "
                           "output claim; read the claim (storage.output) with a pod of your own")
        try:
            return podoutputs.copy_out(self._apis(described.target)[1], described.obj, Path(dest),
                                       poll=min(self.status_poll, 1.0) or 0.05)
        except sdk.api_exception() as exc:
            raise sdk.api_error(exc, f"copying the output of {self.handle(job_id)}") from None

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
        obj, target = self._find(job_id)
        if obj is None:
            if target.get("cancelled"):
                return KubeJob(None, target)
            raise JobNotFound(f"no {self.name} job {job_id} in the cluster; cloudtrain list -p {self.name} shows the "
                              "jobs there")
        described = KubeJob(obj, target)
        if self.map_state(self.job_state(obj)[0]) is State.FAILED:
            try:
                described.exit_code = self._failed_exit_code(self._apis(target)[1], obj)
            except sdk.api_exception() as exc:
                raise sdk.api_error(exc, f"reading the pods of {self.handle(job_id)}") from None
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
                yield from podlogs.pod_lines(core, pod, index, False, sdk.api_error)
            return
        streams = cursor.setdefault("streams", podlogs.PodStreams(core, sdk.api_error))
        streams.start(pods)
        yield from streams.take(final, until=time.monotonic() + self.status_poll)

    def exec_command(self, job_id: str, node: int, command: List[str], interactive: bool) -> NodeExec:
        """The command in node ``node``'s pod (its first container), through the pod's exec
        subresource (``podexec``); ``-it`` (a terminal over the websocket) is kubectl's."""
        obj, target = self._find(job_id)
        status = self.status(job_id)
        if obj is None or status.state != State.RUNNING:
            raise BadInput(f"{self.handle(job_id)} is {status.state.value}: exec needs a running job")
        core = self._apis(target)[1]
        pods = self._pods(core, obj)
        if not 0 <= node < len(pods):
            raise BadInput(f"--node {node}: {self.handle(job_id)} has nodes 0 to {len(pods) - 1}")
        pod = pods[node]
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        if interactive:
            raise BadInput(f"exec -it on {self.name}: cloudtrain runs a command without a terminal here; for a "
                           f"shell: kubectl exec -it -n {ns} {name} -- sh")
        if (pod.get("status") or {}).get("phase") != "Running":
            raise BadInput(f"node {node} of {self.handle(job_id)} (pod {name}) is not running")
        from . import podexec

        def run() -> int:
            try:
                return podexec.run(core, pod, command)
            except Exception as exc:  # the SDK's ApiException (a websocket refused): the platform's error
                from kubernetes.client.exceptions import ApiException
                if isinstance(exc, ApiException):
                    raise sdk.api_error(exc, f"exec into pod {name}") from None
                raise
        return NodeExec(argv=["pods/exec", ns, name, *command], run=run)

    def _stop(self, job_id: str) -> None:
        """Delete the job (its pods, Secret and ConfigMaps go with it), and remember it was
        cancelled: a deleted job's status is CANCELLED."""
        obj, target = self._find(job_id)
        if obj is None:
            return
        group, version, plural = RESOURCES[obj["kind"]]
        ns, name = sdk.ns_name(obj)
        try:
            self._apis(target)[0].delete_namespaced_custom_object(group, version, ns, plural, name,
                                                                  body={"propagationPolicy": "Foreground"})
        except sdk.api_exception() as exc:
            if exc.status != 404:
                raise sdk.api_error(exc, f"deleting {obj['kind']} {job_id}") from None
        self.store.remember(self.handle(job_id), {**target, "kind": obj["kind"], "cancelled": True})

    def list(self) -> List[JobStatus]:
        selector = f"{m.LABEL_PROVIDER}={self.name}"
        out: List[JobStatus] = []
        for target in self.list_targets():
            out += self._list_one(self._apis(target)[0], selector)
        return sorted(out, key=lambda s: s.created_at or 0, reverse=True)

    def _list_one(self, custom, selector: str) -> List[JobStatus]:
        out = []
        for kind in self.kinds:
            group, version, plural = RESOURCES[kind]
            try:
                items = custom.list_cluster_custom_object(group, version, plural, label_selector=selector)["items"]
            except sdk.api_exception() as exc:
                if exc.status == 404:
                    continue  # this operator is not installed
                raise sdk.api_error(exc, f"listing {plural}") from None
            for obj in items:
                raw, message = self.job_state(obj)
                meta = obj["metadata"]
                out.append(JobStatus(self.handle(f"{meta['namespace']}/{meta['name']}"), self.map_state(raw), raw,
                                     meta["name"], message=message, nodes=self.node_count(obj),
                                     created_at=timestamp(meta.get("creationTimestamp"))))
        return out


def code_note(code: int) -> str:
    return f"a container exited with code {code}" + (" (killed: out of memory?)" if code == 137 else "")


# What a restarted training-operator pod can read of its job's restarts: nothing.  The operator
# counts them in the pods' status (status.containerStatuses[].restartCount, summed against
# runPolicy.backoffLimit: training-operator v1.9.0 pkg/core/job.go PastBackoffLimit) and writes no
# label or annotation of it (pkg/controller.v1/common/pod.go createNewPod sets the replica type,
# index and role labels only); mpi-operator's launcher is a batch Job recreated by the Job
# controller, which writes none either.  The downward API reads a pod's metadata, spec.nodeName,
# spec.serviceAccountName and its IPs, never status.containerStatuses (Kubernetes docs, "Downward
# API": "Information available via fieldRef").
NO_RESTART_COUNT = ("CLOUDTRAIN_RESTART_COUNT is not set on the restarted pods: the training operator counts restarts "
                    "in the pods' status (containerStatuses restartCount), which a pod cannot read (the downward API "
                    "exposes no container status); resume from the checkpoint the job finds (storage.checkpoint), or "
                    "use volcano, whose pods see the count")
# KubeRay counts a RayJob's attempts in its status (status.failed, rayjob_types.go RayJobStatus) and
# makes a new RayCluster for each (spec.backoffLimit); it writes the count on no pod.
NO_KUBERAY_RESTART_COUNT = ("CLOUDTRAIN_RESTART_COUNT is not set on a RayJob's driver: KubeRay retries with a new Ray "
                            "cluster (backoffLimit) and counts the attempts in the RayJob's status only "
                            "(status.failed), which no pod can read; resume from the checkpoint the job finds "
                            "(storage.checkpoint)")


def kuberay_restarts_warning(provider: KubernetesProvider, job: JobSpec) -> None:
    """A RayJob's restarts are KubeRay's (``backoffLimit``: a new RayCluster each time), and its
    pods cannot read how many there were: say so when the job asks for restarts."""
    if job.max_restarts > 0:
        warnings.warn(CloudtrainWarning(str(provider.job_error(job, ("max_restarts",), NO_KUBERAY_RESTART_COUNT))),
                      stacklevel=3)


class KubeflowProvider(KubernetesProvider[OptionsT]):
    """Kubeflow's jobs: training-operator v1 kinds here; a ``TrainJob`` (Trainer v2, see
    ``KubeflowTrainerProvider``) is followed by its own state table and pod labels, so that
    ``eks`` reaches either API through this one class."""

    name = "kubeflow"
    description = "Kubeflow PyTorchJob / MPIJob / TFJob on any cluster (kubeconfig)"
    Options: ClassVar[Type[PodOptions]] = KubeflowOptions  # eks and kubeflow-trainer name theirs
    platform = "kubeflow"
    kinds: ClassVar[Tuple[str, ...]] = ("PyTorchJob", "MPIJob", "TFJob", rayjob.KIND)
    # The training operator restarts the whole job itself: runPolicy.backoffLimit (manifests.py;
    # eks inherits it).
    restarts_itself = True
    # The training operator's condition types (the last true one is the job's state); a
    # suspended job is one Kueue holds (queued) or one suspended by hand.
    states = {"Pending": State.PENDING, "Created": State.PENDING, "Suspended": State.PENDING,
              "Running": State.RUNNING, "Restarting": State.STARTING,
              "Succeeded": State.SUCCEEDED, "Failed": State.FAILED, **rayjob.STATES, **trainjob.STATES}

    def check(self, job: JobSpec, options: OptionsT) -> None:
        """Kueue takes the queue and the priority class as label values (``kueue_labels``);
        ``max_restarts`` only where the whole job restarts (``m.WHOLE_JOB_RESTARTS``)."""
        trainer = isinstance(options, TrainerOptions) and getattr(options, "api", "trainer") == "trainer"
        ray_job = rayjob.wanted(job, getattr(options, "ray", None))
        if ray_job:  # KubeRay restarts the whole cluster (backoffLimit: a new RayCluster each retry)
            kuberay_restarts_warning(self, job)
        elif job.max_restarts > 0 and not trainer and job.distribution.type not in m.WHOLE_JOB_RESTARTS:
            raise self.job_error(job, ("max_restarts",), (
                f"{self.name} restarts only the failed pod (training-operator pkg/controller.v1/common/pod.go "
                f"ReconcilePods), which a restarted {job.distribution.type} pod cannot rejoin: the job would hang "
                "instead of restarting; whole-job restarts there are for ddp (torchrun's elastic agent) and "
                "mpi/horovod (the MPIJob's launcher runs mpirun again); set max_restarts: 0, or use volcano"))
        if job.max_restarts > 0 and not trainer and not ray_job:
            warnings.warn(CloudtrainWarning(str(self.job_error(job, ("max_restarts",), NO_RESTART_COUNT))),
                          stacklevel=2)
        for option in ("queue", "priority_class"):
            problem = names.label_value(getattr(options, option) or "")
            if problem:
                raise self.job_error(job, ("providers", self.name, option), f"{problem} (Kueue reads it from the "
                                     f"label {m.KUEUE_QUEUE if option == 'queue' else m.KUEUE_PRIORITY})")
        super().check(job, options)

    def manifests(self, job: JobSpec, options: OptionsT) -> List[dict]:
        if rayjob.wanted(job, getattr(options, "ray", None)):
            return rayjob.build_rayjob(job, self.manifest_options(job, options))
        return m.build_kubeflow(job, self.manifest_options(job, options))

    def job_state(self, obj: dict) -> Tuple[str, str]:
        if obj["kind"] == "TrainJob":
            return trainjob.job_state(obj)
        if obj["kind"] == rayjob.KIND:
            return rayjob.job_state(obj)
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
        if obj["kind"] == rayjob.KIND:
            return rayjob.node_count(obj)
        spec = obj.get("spec") or {}
        specs = spec.get("pytorchReplicaSpecs") or spec.get("tfReplicaSpecs") or {}
        if obj["kind"] == "MPIJob":
            specs = {"Worker": (spec.get("mpiReplicaSpecs") or {}).get("Worker", {})}
        return sum(int(s.get("replicas", 1)) for s in specs.values()) or None


class VolcanoProvider(KubernetesProvider[VolcanoOptionsT]):
    name = "volcano"
    description = "Volcano Jobs (batch.volcano.sh) on any cluster (kubeconfig)"
    platform = "volcano"
    Options = VolcanoOptions
    kinds: ClassVar[Tuple[str, ...]] = ("Job", rayjob.KIND)
    # Volcano restarts the whole job itself: the RestartJob policy on PodFailed/PodEvicted
    # (manifests.py build_volcano; modelarts-lite inherits it).
    restarts_itself = True
    # Volcano job phases.  Aborted: a pod failed under the AbortJob policy (no restarts left).
    states = {"Pending": State.PENDING, "Running": State.RUNNING, "Restarting": State.STARTING,
              "Completing": State.RUNNING, "Completed": State.SUCCEEDED,
              "Aborting": State.RUNNING, "Aborted": State.FAILED, "Failed": State.FAILED,
              "Terminating": State.RUNNING, "Terminated": State.CANCELLED,
              **{k: v for k, v in rayjob.STATES.items() if k not in ("Running", "Failed")}}

    def check(self, job: JobSpec, options: VolcanoOptionsT) -> None:
        if rayjob.wanted(job, options.ray):
            kuberay_restarts_warning(self, job)
        super().check(job, options)

    def manifest_options(self, job: JobSpec, options: VolcanoOptionsT) -> m.ManifestOptions:
        mopts = super().manifest_options(job, options)
        return replace(mopts, scheduler_name=options.scheduler_name, volcano_plugins=dict(options.plugins))

    def manifests(self, job: JobSpec, options: VolcanoOptionsT) -> List[dict]:
        if rayjob.wanted(job, options.ray):
            return rayjob.build_rayjob(job, self.manifest_options(job, options), volcano=True)
        return m.build_volcano(job, self.manifest_options(job, options))

    def job_state(self, obj: dict) -> Tuple[str, str]:
        if obj["kind"] == rayjob.KIND:
            return rayjob.job_state(obj)
        state = (obj.get("status") or {}).get("state") or {}
        return state.get("phase") or "Pending", state.get("message") or state.get("reason") or ""

    def node_count(self, obj: dict) -> Optional[int]:
        if obj["kind"] == rayjob.KIND:
            return rayjob.node_count(obj)
        return sum(int(t.get("replicas", 0)) for t in (obj.get("spec") or {}).get("tasks", [])) or None


class KubeflowTrainerProvider(KubeflowProvider[KubeflowTrainerOptions]):
    name = trainjob.PLATFORM
    description = "Kubeflow Trainer v2 TrainJob on any cluster (kubeconfig)"
    platform = trainjob.PLATFORM
    Options = KubeflowTrainerOptions
    kinds = ("TrainJob",)
    states = trainjob.STATES  # a TrainJob's own words (its conditions), not a PyTorchJob's
    # A TrainJob has no restart field, so max_restarts is refused (trainjob.NO_RESTARTS).
    restarts_itself = False

    def check(self, job: JobSpec, options: KubeflowTrainerOptions) -> None:
        super().check(job, options)
        render.trainer_check(self, job, options)

    def manifest_options(self, job: JobSpec, options: KubeflowTrainerOptions) -> m.ManifestOptions:
        return render.trainer_manifest_options(super().manifest_options(job, options))

    def manifests(self, job: JobSpec, options: KubeflowTrainerOptions) -> List[dict]:
        return render.trainer_objects(self, job, options, self.manifest_options(job, options))

    @classmethod
    def default_cluster(cls, job: JobSpec) -> Cluster:
        return Cluster(hosts=[f"{job.name}-node-0-{i}.{job.name}" for i in range(job.distribution.nodes)],
                       master_port=trainjob.TRAINER_PORT)
