"""Kubernetes manifests for a job: Kubeflow PyTorchJob / MPIJob / TFJob and Volcano Jobs.

Pure functions over plain dicts (no ``kubernetes`` SDK, no network, no clock, no credentials),
shared by the ``kubeflow`` and ``volcano`` providers and reused by ``eks`` and
``modelarts-lite``.  ``build_kubeflow(job, options)`` / ``build_volcano(job, options)`` return
the ordered list of objects to create: the job's ``Secret`` (if it has secrets), the launcher
``ConfigMap``, then the job object.

Shipping the launcher: a ConfigMap
    The node's command is always the launcher, ``python3 -m cloudtrain.launch <launch args> --
    <command>``.  Its bundle (``cloudtrain.launch.bundle``: standard-library modules, ~45 KB,
    far below a ConfigMap's 1 MiB) is rendered as the ConfigMap ``<name>-launcher`` and mounted
    read-only at ``/opt/cloudtrain``; every container's command is a ``/bin/sh -c`` wrapper that
    puts ``/opt/cloudtrain`` first on the image's own ``PYTHONPATH`` (never a container ``env``
    entry: that would replace the image's, which Ascend/CANN images rely on).  Chosen over an init
    container because an init container needs an image that carries cloudtrain (none is
    published, and pulling one costs every pod a round trip), while the ConfigMap needs nothing
    but the job's own image with Python >= 3.8; it is created with the job in one step, shows
    in a dry run, and changes the spec hash when the launcher changes.  ConfigMap keys cannot
    hold ``/``, so ``cloudtrain/launch/main.py`` is stored under ``cloudtrain.launch.main.py``
    and the volume's ``items`` map each key back to its path.

Shipping the code: a second ConfigMap
    ``code:`` (``cloudtrain.transfer.shipping.archive`` without the launcher: reproducible, named by its
    sha256) travels as the ConfigMap ``<name>-code`` whose ``binaryData["code.tar.gz"]`` is the
    gzip'd tar, mounted read-only at ``/opt/cloudtrain-code``; the node shell runs ``python3 -m
    cloudtrain.launch.unpack`` into the working directory before the command.  The render shows
    the archive's size and digest in place of its bytes (``CodePayload.placeholder``); the provider
    puts the bytes in at submit, as it does the secrets' values.  Kubernetes caps a ConfigMap's
    ``data`` + ``binaryData`` at 1 MiB (``MaxSecretSize``, checked by ``ValidateConfigMap``), so an
    archive above ``INLINE_CODE_LIMIT`` (900 KiB packed) goes through an object store instead.
    ``code: null``: no ConfigMap, no unpack (the image holds the code).

Shipping larger code: an object store and a time-limited URL in a Secret
    With ``providers.<p>.code_store`` a submit uploads the archive, content-addressed
    (``<prefix>/cloudtrain-code/<sha256>.tar.gz``: core's ``CloudProvider.ship``), and the
    provider makes a time-limited GET URL for it (``CodePayload.url`` says where; the render
    shows the ``<scheme>/PutObject``; ``render.StoredCode``).  The
    URL travels in the Secret ``<name>-code-url`` (key ``url``, ``***`` in the render), mounted
    read-only at ``/opt/cloudtrain-code-url``: a file, not an environment variable, so the
    training processes never see it.  The node shell runs ``python3 -m cloudtrain.launch.unpack
    --url-file /opt/cloudtrain-code-url/url --sha256 <digest>``, which fetches the archive with
    the standard library, checks its sha256 against the one in the pod spec, and unpacks it.  No
    credential reaches the pod: the URL reads that one object until it expires.

Storage
    ``storage.inputs`` / ``storage.output`` as ``pvc://CLAIM[/PATH]``: each claim is one
    ``persistentVolumeClaim`` volume of every pod, mounted at ``/cloudtrain/inputs/<name>``
    (read-only) and ``/cloudtrain/output`` with ``subPath`` PATH; the containers get
    ``CLOUDTRAIN_INPUT_<NAME>`` and ``CLOUDTRAIN_OUTPUT_DIR`` naming those paths.

Secrets
    One ``Secret`` ``<name>-secrets`` whose ``stringData`` holds every secret of the job as
    ``***`` in the rendered output; the provider puts the real values (resolved at submit)
    into that object just before creating it.  Containers reference them with
    ``valueFrom.secretKeyRef``, never a literal value.

Task and replica names
    Kubeflow: ``Master``/``Worker`` (PyTorchJob), ``Launcher``/``Worker`` (MPIJob),
    ``PS``/``Worker`` (TFJob).  Volcano: ``master``/``worker`` (ddp, deepspeed, none),
    ``head``/``worker`` (ray), ``launcher``/``worker`` (mpi, horovod), ``ps``/``worker``
    (ps-worker); node ranks follow the task order (``CLOUDTRAIN_VOLCANO_TASKS``), so the
    detector builds the host list from ``VC_<TASK>_HOSTS`` in that order and this node's rank
    from its task's offset plus ``VC_TASK_INDEX``.  A task with zero replicas is left out.

Every object carries the labels ``cloudtrain.io/job`` and ``cloudtrain.io/provider`` and the
annotation ``cloudtrain.io/spec-hash`` (sha256 of the object without that annotation), so a
create can attach to an identical existing object instead of duplicating it.
"""
from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from cloudtrain.transfer import storage
from cloudtrain.spec.job import JobSpec
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.input.secrets import MASK
from cloudtrain.transfer.shipping import launcher_path

LABEL_JOB = "cloudtrain.io/job"
LABEL_PROVIDER = "cloudtrain.io/provider"
LABEL_ROLE = "cloudtrain.io/role"
ANNOTATION_HASH = "cloudtrain.io/spec-hash"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY = "kueue.x-k8s.io/priority-class"
LAUNCHER_DIR = "/opt/cloudtrain"
LAUNCHER_VOLUME = "cloudtrain-launcher"
CODE_DIR = "/opt/cloudtrain-code"
CODE_VOLUME = "cloudtrain-code"
CODE_KEY = "code.tar.gz"
CODE_URL_DIR = "/opt/cloudtrain-code-url"
CODE_URL_VOLUME = "cloudtrain-code-url"
CODE_URL_KEY = "url"
# A ConfigMap holds at most 1 MiB of data + binaryData (Kubernetes: "The data stored in a
# ConfigMap cannot exceed 1 MiB"; core.MaxSecretSize in ValidateConfigMap); 900 KiB packed
# leaves room for the object's metadata and the apiserver's own overhead.
INLINE_CODE_LIMIT = 900 * 1024
INPUTS_DIR = "/cloudtrain/inputs"
OUTPUT_DIR = "/cloudtrain/output"
SHM_VOLUME = "dshm"
CHECKPOINT_VOLUME = "cloudtrain-checkpoint"
CHECKPOINT_MOUNT = "/cloudtrain/checkpoint"   # CLOUDTRAIN_CHECKPOINT_DIR in every pod
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Kubeflow's operators and Volcano name pods and services "<job>-<replica>-<index>"; those
# must stay DNS-1123 labels (<= 63), so the job name leaves room for the longest suffix.
_LONGEST_ROLE = "launcher"
# A RayJob's name: at most 47 characters (its RayCluster's name adds "-" and 5 characters, a
# RayCluster's is at most 53), and a DNS-1035 label (KubeRay ray-operator/controllers/ray/utils/
# validation.go ValidateRayJobMetadata, constant.go MaxRayJobNameLength).
KUBERAY_NAME_LIMIT = 47

# RDMA presets by device-plugin resource; the job's own env always wins.
RDMA_ENV_PRESETS: Dict[str, Dict[str, str]] = {
    "rdma/hca": {"NCCL_IB_DISABLE": "0"},
    "rdma/rdma_shared_device_a": {"NCCL_IB_DISABLE": "0"},
    # no FI_EFA_USE_DEVICE_RDMA here: libfabric aborts with it on EFA devices without RDMA read
    # (g4dn, g5, p3dn); the eks provider adds it where its catalog row says the device reads
    "vpc.amazonaws.com/efa": {"FI_PROVIDER": "efa", "NCCL_IB_DISABLE": "1"},
}
DEFAULT_RDMA_RESOURCE = "rdma/hca"
HUGEPAGES_2MI = "hugepages-2Mi"
HUGEPAGES_MEMORY_REQUEST = "8000Mi"

# mpirun reaches the other nodes over ssh.  What AWS's post on Horovod/PyTorch training across
# EC2 GPU nodes (with mpi-operator) learnt: the keys come from a mounted Secret (read-only,
# group-readable), so sshd must not check modes and the client must neither ask about nor record
# host keys.  Done at start-up so any image with sshd works.
SSH_CLIENT_PREP = ('printf "Host *\\n  StrictHostKeyChecking no\\n  UserKnownHostsFile /dev/null\\n" '
                   '>> /etc/ssh/ssh_config 2>/dev/null || true')
SSHD_START = "mkdir -p /run/sshd && /usr/sbin/sshd -o StrictModes=no"
SSHD_PORT = 22


@dataclass(frozen=True)
class CodePayload:
    """The job's code archive: its sha256 and packed size; the code ConfigMap carries it (its
    bytes added at submit, never rendered), or, with ``url``, the object store holds it there
    (``scheme://bucket/key``) and the pods fetch it through a time-limited URL."""

    sha256: str
    size: int
    url: Optional[str] = None

    @property
    def inline(self) -> bool:
        return self.url is None

    @property
    def placeholder(self) -> str:
        return f"<code.tar.gz: {self.size} bytes, sha256:{self.sha256}; sent at submit>"


@dataclass(frozen=True)
class ManifestOptions:
    """What a cluster needs beyond the job; providers fill it from their ``Options`` model."""

    provider: str = "kubeflow"
    namespace: str = "default"
    name: Optional[str] = None                       # object name (default: the job's name, shortened if needed)
    image: Optional[str] = None                      # default: the job's image
    image_pull_policy: Optional[str] = None
    image_pull_secrets: Tuple[str, ...] = ()
    service_account: Optional[str] = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    gpu_selection: Optional[Tuple[str, Tuple[str, ...]]] = None  # (label, values): required node affinity In values
    tolerations: Tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)            # extra labels on every object and pod
    pod_annotations: Mapping[str, str] = field(default_factory=dict)   # e.g. ModelArts Lite's `cabinet`
    python: str = "python3"
    platform: Optional[str] = None                   # `cloudtrain launch --platform` (None: auto-detect)
    workdir: Optional[str] = None
    master_port: int = 29500
    shm_gb: float = 1.0                              # /dev/shm when the job does not set resources.shm_gb
    gpu_resource: str = "nvidia.com/gpu"
    rdma_resource: Optional[str] = None              # network.rdma=on: default rdma/hca; auto: on iff set
    rdma_count: int = 1
    rdma_env: Optional[Mapping[str, str]] = None     # default: RDMA_ENV_PRESETS[resource]
    rdma_device: bool = True                         # False: the nodes' RDMA needs no device plugin (Ascend: hccn.conf)
    hugepages_2mi: Optional[str] = None              # with an RDMA device: hugepages-2Mi to request (EFA: eks)
    # Volcano: spec.queue (default "default"); Kubeflow, Trainer: Kueue's LocalQueue
    queue: Optional[str] = None
    # Volcano: a PriorityClass; Kubeflow, Trainer: Kueue's WorkloadPriorityClass
    priority_class: Optional[str] = None
    scheduler_name: str = "volcano"
    queue_scheduler: str = "kueue"                   # Kubeflow: kueue (labels) or volcano (runPolicy.schedulingPolicy)
    volcano_plugins: Mapping[str, List[str]] = field(default_factory=dict)  # added to svc/env (e.g. configmap1980)
    ssh_auth_mount_path: str = "/root/.ssh"
    detector_targets: Tuple[str, ...] = ()           # detector modules shipped in the launcher bundle
    code: Optional[CodePayload] = None               # the code ConfigMap's archive (None: the image holds the code)
    jobset: bool = False                             # a TrainJob: its JobSet's pod names bound the name (name_suffix)
    kuberay: bool = False                            # a RayJob: KubeRay's name limit bounds the name (object_name)

    @classmethod
    def of(cls, value: Union["ManifestOptions", Mapping[str, Any], None]) -> "ManifestOptions":
        if value is None:
            return cls()
        if isinstance(value, ManifestOptions):
            return value
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown manifest option(s): {', '.join(unknown)}")
        data = dict(value)
        for key in ("image_pull_secrets", "tolerations", "detector_targets"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)


# -- small helpers -----------------------------------------------------------------------------
def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def name_suffix(job: JobSpec, options: ManifestOptions) -> str:
    """The longest suffix the operator adds to the job's name for a pod (and its Service).
    Kubeflow v1 and Volcano: ``-launcher-<index>``.  A TrainJob's JobSet: pods are
    ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<5 random>``, which the JobSet webhook
    refuses past 63 characters (kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go,
    ValidateCreate: ``longestPodName := placement.GenPodName(...) + "-abcde"``); the replicated
    jobs are the default runtimes' ``node`` and ``launcher`` (tests/data/runtimes)."""
    last = max(job.distribution.nodes - 1, 0)
    if options.jobset:
        return "-%s-0-%d-abcde" % (_LONGEST_ROLE, last)
    return "-%s-%d" % (_LONGEST_ROLE, last)


def object_name(job: JobSpec, options: ManifestOptions) -> str:
    """The job objects' name: an RFC 1035 label that leaves room for the pods' suffix
    (``name_suffix``).  RFC 1035, not 1123: a name must start with a letter for the
    training-operator webhooks (v1.9.0 pkg/webhooks/pytorch/pytorchjob_webhook.go,
    ``NameIsDNS1035Label``; the TFJob one alike), mpi-operator (pkg/apis/kubeflow/validation/
    validation.go, ValidateMPIJob: ``NameIsDNS1035Label``), the TrainJob CRD's CEL rule
    (``^[a-z]([-a-z0-9]*[a-z0-9])?$``) and Volcano's svc plugin, which names a Service after the job
    (Service names are DNS-1035 labels)."""
    name = options.name or job.name
    room = 63 - len(name_suffix(job, options))
    if options.kuberay:  # KubeRay v1.7.0 utils/validation.go ValidateRayJobMetadata: MaxRayJobNameLength = 53 - 6
        room = min(room, KUBERAY_NAME_LIMIT)
    if len(name) > room:
        digest = _hash(name)[:6]
        name = name[:room - 7].rstrip("-") + "-" + digest
    if not DNS1035_LABEL.match(name):
        raise ValueError(f"{name!r} is not an RFC 1035 label (a letter first, then lowercase letters, digits and "
                         "'-', ending with a letter or digit), which the job's Kubernetes objects and Services need")
    return name


def cpu_quantity(cores: float) -> str:
    return str(int(cores)) if float(cores).is_integer() else "%dm" % round(cores * 1000)


def gib_quantity(gib: float) -> str:
    return "%dGi" % gib if float(gib).is_integer() else "%dMi" % round(gib * 1024)


def rdma_enabled(job: JobSpec, options: ManifestOptions) -> bool:
    """Does a pod ask for an RDMA device?  ``on``: always; ``auto``: when the options name an
    RDMA resource; ``off``: never -- and never where the nodes' RDMA needs no device plugin."""
    if not options.rdma_device:
        return False
    return job.network.rdma == "on" or (job.network.rdma == "auto" and options.rdma_resource is not None)


def kubelet_verbatim(text: str) -> str:
    """``text`` as an item of a container's ``command`` or ``args`` that reaches the process
    unchanged.  The kubelet expands ``$(VAR)`` there (a name it does not know stays as written)
    and turns ``$$`` into ``$``, one pass left to right (kubernetes'
    third_party/forked/golang/expansion/expand.go); so a ``$`` before ``$`` or ``(`` is doubled
    and the user's ``$(HOME)`` or ``$$5`` reaches the shell as the user wrote it."""
    return re.sub(r"\$(?=[$(])", "$$", text)


def _verbatim_commands(node: Any) -> None:
    """Every ``command``/``args`` item and ``env`` value of the containers (and of TrainJob's
    trainer) under ``node``, through ``kubelet_verbatim``; in place."""
    if isinstance(node, dict):
        if "image" in node:
            for key in ("command", "args"):
                if isinstance(node.get(key), list):
                    node[key] = [kubelet_verbatim(a) if isinstance(a, str) else a for a in node[key]]
            for item in node.get("env") or []:  # env values are expanded the same way
                if isinstance(item, dict) and isinstance(item.get("value"), str):
                    item["value"] = kubelet_verbatim(item["value"])
        for value in node.values():
            _verbatim_commands(value)
    elif isinstance(node, list):
        for value in node:
            _verbatim_commands(value)


def stamp(obj: dict, job: JobSpec, options: ManifestOptions, kubelet: bool = True) -> dict:
    """Add the cloudtrain labels and the spec-hash annotation (computed last, over the rest); the
    containers' commands and env values escaped for the kubelet (``kubelet_verbatim``) unless
    ``kubelet`` is False (an object a caller reshapes and stamps again: escaped once, there)."""
    if kubelet:
        _verbatim_commands(obj)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("namespace", options.namespace)
    meta["labels"] = {**dict(options.labels), **meta.get("labels", {}), **common_labels(job, options)}
    annotations = meta.setdefault("annotations", {})
    annotations.pop(ANNOTATION_HASH, None)
    annotations[ANNOTATION_HASH] = _hash(obj)
    return obj


def common_labels(job: JobSpec, options: ManifestOptions) -> Dict[str, str]:
    return {LABEL_JOB: object_name(job, options), LABEL_PROVIDER: options.provider}


# -- the launcher bundle and the secret ------------------------------------------------------
@lru_cache(maxsize=8)
def _bundle(detector_targets: Tuple[str, ...]) -> Tuple[Tuple[str, str], ...]:
    # the files write_bundle would copy, read where they are (no copy in a temporary directory:
    # that cost a render ~40 ms)
    from cloudtrain.launch.bundle import ENTRY, bundle_sources
    texts = {rel.as_posix(): origin.read_text() for origin, rel in bundle_sources(detector_targets)}
    texts["entry.sh"] = ENTRY
    return tuple(sorted(texts.items()))


def launcher_bundle(detector_targets=()) -> Dict[str, str]:
    """``{relative path: text}`` of the launcher bundle (read from this installation)."""
    return dict(_bundle(tuple(detector_targets)))


def configmap_key(path: str) -> str:
    return path.replace("/", ".")


def launcher_configmap_name(job: JobSpec, options: ManifestOptions) -> str:
    return object_name(job, options) + "-launcher"


def secret_name(job: JobSpec, options: ManifestOptions) -> str:
    return object_name(job, options) + "-secrets"


def launcher_configmap(job: JobSpec, options: ManifestOptions, bundle: Mapping[str, str]) -> dict:
    data = {configmap_key(path): text for path, text in sorted(bundle.items())}
    if len(data) != len(bundle):
        raise ValueError("two launcher files map to the same ConfigMap key")
    return stamp({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": launcher_configmap_name(job, options)}, "data": data}, job, options)


def code_configmap_name(job: JobSpec, options: ManifestOptions) -> str:
    return object_name(job, options) + "-code"


def code_configmap(job: JobSpec, options: ManifestOptions) -> Optional[dict]:
    """The job's code as ``binaryData`` (its size and digest in the render; the bytes at submit)."""
    if options.code is None or not options.code.inline:
        return None
    return stamp({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": code_configmap_name(job, options)},
                  "binaryData": {CODE_KEY: options.code.placeholder}}, job, options)


def code_url_secret_name(job: JobSpec, options: ManifestOptions) -> str:
    return object_name(job, options) + "-code-url"


def code_url_secret(job: JobSpec, options: ManifestOptions) -> Optional[dict]:
    """The Secret that will hold the stored archive's time-limited URL (``***`` in the render)."""
    if options.code is None or options.code.inline:
        return None
    return stamp({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": code_url_secret_name(job, options)},
                  "stringData": {CODE_URL_KEY: MASK}}, job, options)


def code_source(job: JobSpec, options: ManifestOptions) -> Optional[dict]:
    """The object the pods read the code from: the code ConfigMap, or the code URL's Secret."""
    return code_configmap(job, options) or code_url_secret(job, options)


def code_volume(job: JobSpec, options: ManifestOptions) -> Optional[Tuple[dict, dict]]:
    """(pod volume, container mount) of the code's source, None with ``code: null``."""
    if options.code is None:
        return None
    if options.code.inline:
        return ({"name": CODE_VOLUME, "configMap": {"name": code_configmap_name(job, options), "defaultMode": 0o444}},
                {"name": CODE_VOLUME, "mountPath": CODE_DIR, "readOnly": True})
    return ({"name": CODE_URL_VOLUME,
             "secret": {"secretName": code_url_secret_name(job, options), "defaultMode": 0o444}},
            {"name": CODE_URL_VOLUME, "mountPath": CODE_URL_DIR, "readOnly": True})


def unpack_step(options: ManifestOptions) -> Optional[str]:
    """The shell step that unpacks the shipped code into the working directory (None: none)."""
    return None if options.code is None else unpack_command(options.python, options.code)


def unpack_command(python: str, code: Optional[CodePayload] = None) -> str:
    """``python -m cloudtrain.launch.unpack --sha256 HEX /opt/cloudtrain-code/code.tar.gz`` (the
    ConfigMap's archive) or ``... --url-file /opt/cloudtrain-code-url/url --sha256 HEX`` (a
    stored one): either way the archive's sha256 is checked before anything is written."""
    if code is None:
        source = [f"{CODE_DIR}/{CODE_KEY}"]
    elif code.inline:
        source = ["--sha256", code.sha256, f"{CODE_DIR}/{CODE_KEY}"]
    else:
        source = ["--url-file", f"{CODE_URL_DIR}/{CODE_URL_KEY}", "--sha256", code.sha256]
    return " ".join(shlex.quote(a) for a in (python, "-m", "cloudtrain.launch.unpack", *source))


def secret_manifest(job: JobSpec, options: ManifestOptions) -> Optional[dict]:
    """The job's Secret with ``***`` placeholders; the provider fills the values at submit."""
    if not job.secrets:
        return None
    return stamp({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": secret_name(job, options)},
                  "stringData": {name: MASK for name in sorted(job.secrets)}}, job, options)


# -- storage: pvc:// inputs and output -------------------------------------------------------------
def claim_volumes(job: JobSpec) -> Dict[str, str]:
    """``{claim: volume name}`` of the claims storage names, in order of first use."""
    claims: Dict[str, str] = {}
    for _, uri in storage.entries(job):
        claim = storage.split(uri)[1].partition("/")[0]
        claims.setdefault(claim, f"ct-data-{len(claims)}")
    return claims


def storage_mounts(job: JobSpec) -> Tuple[List[dict], Dict[str, str]]:
    """(volumeMounts, env) for storage's inputs and output."""
    volumes = claim_volumes(job)
    mounts, env = [], {}
    for loc, uri in storage.entries(job):
        claim = storage.split(uri)[1].partition("/")[0]
        path = f"{INPUTS_DIR}/{loc[-1]}" if loc[1] == "inputs" else OUTPUT_DIR
        mount: Dict[str, Any] = {"name": volumes[claim], "mountPath": path}
        sub_path = storage.path_in(uri)
        if sub_path:
            mount["subPath"] = sub_path
        if loc[1] == "inputs":
            mount["readOnly"] = True
            env[storage.input_env(loc[-1])] = path
        else:
            env[storage.OUTPUT_ENV] = path
        mounts.append(mount)
    return mounts, env


# -- containers and pods -------------------------------------------------------------------------
def launch_command(job: JobSpec, options: ManifestOptions) -> List[str]:
    platform = ["--platform", options.platform] if options.platform else []
    return [options.python, "-m", "cloudtrain.launch", *platform, *job.launch_args(), "--", *job.argv]


def node_shell(command: List[str], ssh: bool = False, sshd: bool = False,
               options: Optional[ManifestOptions] = None) -> List[str]:
    """``command`` run through a shell that prepends the launcher to the image's ``PYTHONPATH``,
    unpacks the shipped code (when ``options`` carry it) and, for mpirun, prepares the ssh client
    (``ssh``) and starts sshd (``sshd``) first."""
    steps = ["export " + launcher_path(LAUNCHER_DIR)]
    unpack = unpack_step(options) if options else None
    if unpack:
        steps.append(unpack + " || exit 1")
    if ssh or sshd:
        steps.append(SSH_CLIENT_PREP)
    script = "; ".join(steps) + "; " + (SSHD_START + " && " if sshd else "") + 'exec "$@"'
    return ["/bin/sh", "-c", script, "cloudtrain-node", *command]


def env_list(job: JobSpec, options: ManifestOptions, extra: Optional[Mapping[str, str]] = None,
             rdma: bool = False) -> List[dict]:
    values: Dict[str, str] = {}
    if rdma:
        resource = options.rdma_resource or DEFAULT_RDMA_RESOURCE
        preset = options.rdma_env if options.rdma_env is not None else RDMA_ENV_PRESETS.get(resource, {})
        values.update(preset)
    values.update(job.env)
    values.update({
        "CLOUDTRAIN_JOB_ID": object_name(job, options),
        "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
        "CLOUDTRAIN_MASTER_PORT": str(options.master_port),
    })
    values.update(extra or {})
    out: List[dict] = [{"name": k, "value": str(v)} for k, v in values.items()]
    out += [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret_name(job, options), "key": name}}}
            for name in sorted(job.secrets)]
    return out


def resources_of(job: JobSpec, options: ManifestOptions, rdma: bool) -> dict:
    r = job.resources
    limits: Dict[str, str] = {}
    if r.cpus_per_node:
        limits["cpu"] = cpu_quantity(r.cpus_per_node)
    if r.memory_gb:
        limits["memory"] = gib_quantity(r.memory_gb)
    if r.gpus_per_node:
        limits[options.gpu_resource] = str(r.gpus_per_node)
    if rdma:
        limits[options.rdma_resource or DEFAULT_RDMA_RESOURCE] = str(options.rdma_count)
        if options.hugepages_2mi:
            limits[HUGEPAGES_2MI] = options.hugepages_2mi
    # requests = limits: Guaranteed QoS for cpu/memory; extended resources and huge pages must be equal anyway
    out = {"limits": limits, "requests": dict(limits)} if limits else {}
    if HUGEPAGES_2MI in limits and not ({"cpu", "memory"} & set(limits)):
        # "HugePages require cpu or memory" (kubernetes pkg/apis/core/validation/validation.go,
        # ValidateResourceRequirements): a memory request (no limit, so the pod is not capped),
        # the 8000Mi AWS's EFA example pairs with its huge pages (aws-samples/aws-efa-eks)
        out["requests"]["memory"] = HUGEPAGES_MEMORY_REQUEST
    return out


def checkpoint_claim(job: JobSpec) -> Optional[Tuple[str, str]]:
    """``storage.checkpoint`` ``pvc://CLAIM/SUB/PATH`` as (claim, sub-path), None without one."""
    uri = job.storage.checkpoint
    if not uri:
        return None
    claim, _, sub = uri[len("pvc://"):].partition("/")
    return claim, sub.strip("/")


def container(job: JobSpec, options: ManifestOptions, name: str, command: List[str], *,
              compute: bool = True, extra_env: Optional[Mapping[str, str]] = None,
              ports: Optional[List[dict]] = None) -> dict:
    """One node's container.  ``compute=False`` (an MPIJob launcher) gets no GPUs/RDMA/shm."""
    image = options.image or job.image
    if not image:
        raise ValueError("the job has no image; set `image` or the provider's image option")
    rdma = compute and rdma_enabled(job, options)
    c: Dict[str, Any] = {"name": name, "image": image, "command": command,
                         "volumeMounts": [{"name": LAUNCHER_VOLUME, "mountPath": LAUNCHER_DIR, "readOnly": True}]}
    data_mounts, data_env = storage_mounts(job)
    c["env"] = env_list(job, options, {**data_env, **(extra_env or {})}, rdma=rdma_enabled(job, options))
    c["volumeMounts"] += data_mounts
    code = code_volume(job, options)
    if code is not None:
        c["volumeMounts"].append(code[1])
    if options.image_pull_policy:
        c["imagePullPolicy"] = options.image_pull_policy
    if options.workdir:
        c["workingDir"] = options.workdir
    if ports:
        c["ports"] = ports
    if compute:
        res = resources_of(job, options, rdma)
        if res:
            c["resources"] = res
        c["volumeMounts"].append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
        claim = checkpoint_claim(job)
        if claim:  # every attempt's pods mount the same claim: what one saved, the next sees
            mount = {"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_MOUNT}
            c["volumeMounts"].append({**mount, "subPath": claim[1]} if claim[1] else mount)
    if checkpoint_claim(job):
        # Named on every container, the MPIJob launcher's too (which mounts nothing): mpirun
        # starts the ranks over ssh, where the worker pods' env is gone, and forwards only the
        # launcher's CLOUDTRAIN_* (-x, cloudtrain.launch.plans.FORWARDED_PREFIXES).
        c["env"].insert(0, {"name": "CLOUDTRAIN_CHECKPOINT_DIR", "value": CHECKPOINT_MOUNT})
    if rdma:
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    return c


def pod_template(job: JobSpec, options: ManifestOptions, role: str, containers: List[dict],
                 bundle: Mapping[str, str], restart_policy: Optional[str] = None) -> dict:
    spec: Dict[str, Any] = {"containers": containers}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if options.service_account:
        spec["serviceAccountName"] = options.service_account
    if options.node_selector:
        spec["nodeSelector"] = dict(options.node_selector)
    if options.gpu_selection:
        from .gpu_products import node_affinity
        spec["affinity"] = {"nodeAffinity": node_affinity(*options.gpu_selection)}
    if options.tolerations:
        spec["tolerations"] = [dict(t) for t in options.tolerations]
    if options.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in options.image_pull_secrets]
    volumes = [{"name": LAUNCHER_VOLUME, "configMap": {
        "name": launcher_configmap_name(job, options), "defaultMode": 0o644,
        "items": [{"key": configmap_key(p), "path": p} for p in sorted(bundle)]}}]
    volumes += [{"name": volume, "persistentVolumeClaim": {"claimName": claim}}
                for claim, volume in claim_volumes(job).items()]
    code = code_volume(job, options)
    if code is not None:
        volumes.append(code[0])
    if any(m["name"] == SHM_VOLUME for c in containers for m in c.get("volumeMounts", [])):
        volumes.append({"name": SHM_VOLUME, "emptyDir": {
            "medium": "Memory", "sizeLimit": gib_quantity(job.resources.shm_gb or options.shm_gb)}})
    checkpoints = checkpoint_claim(job)  # the containers mount it only when there is one (container())
    if checkpoints and any(m["name"] == CHECKPOINT_VOLUME for c in containers for m in c.get("volumeMounts", [])):
        volumes.append({"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": checkpoints[0]}})
    spec["volumes"] = volumes
    meta: Dict[str, Any] = {"labels": {**dict(options.labels), **common_labels(job, options), LABEL_ROLE: role}}
    if options.pod_annotations:
        meta["annotations"] = dict(options.pod_annotations)
    return {"metadata": meta, "spec": spec}


# -- Kubeflow ------------------------------------------------------------------------------------
# The label the training operator puts on every replica's pods (training-operator v1.9.0
# pkg/apis/kubeflow.org/v1/common_types.go ReplicaIndexLabel), read through the downward API.
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
def _run_policy(job: JobSpec, options: ManifestOptions, min_available: int) -> dict:
    policy: Dict[str, Any] = {"cleanPodPolicy": "Running", "backoffLimit": job.max_restarts}
    if options.queue_scheduler == "volcano" and (options.queue or options.priority_class):
        # An operator that gang-schedules with Volcano (--gang-scheduler-name=volcano) makes one
        # PodGroup per job from runPolicy.schedulingPolicy: minAvailable, queue (default "default")
        # and priorityClass (training-operator v1.8.1 pkg/controller.v1/common/job.go, ReconcileJobs
        # under EnableGangScheduling); Kueue's labels are not rendered then (kueue_labels).
        sched: Dict[str, Any] = {"minAvailable": min_available}
        if options.queue:
            sched["queue"] = options.queue
        if options.priority_class:
            sched["priorityClass"] = options.priority_class
        policy["schedulingPolicy"] = sched
    if job.max_runtime:  # from the job's start, restarts included
        policy["activeDeadlineSeconds"] = job.max_runtime
    return policy


def gang_size(job: JobSpec) -> int:
    """How many of the job's pods the gang scheduler waits for: ``min_nodes`` for ddp only, whose
    torchrun rendezvous (c10d, ``--nnodes min:max``) starts with fewer nodes and admits the rest
    later; every other type needs all its nodes at once (mpirun's hostfile, DeepSpeed's and Ray's
    fixed node lists, a TFJob's cluster, `none`'s every node), so a partial gang would start and
    wait or fail (Volcano: a job starts once minAvailable pods are scheduled, batch.volcano.sh
    JobSpec.minAvailable)."""
    d = job.distribution
    return d.min_nodes if d.type == "ddp" and d.min_nodes else d.nodes


def kueue_labels(options: ManifestOptions) -> Dict[str, str]:
    """Kueue's job labels: the LocalQueue and the WorkloadPriorityClass (kubernetes-sigs/kueue
    pkg/controller/constants: QueueLabel, WorkloadPriorityClassLabel)."""
    out: dict = {}
    if options.queue_scheduler != "kueue":
        return out
    if options.queue:
        out[KUEUE_QUEUE] = options.queue
    if options.priority_class:
        out[KUEUE_PRIORITY] = options.priority_class
    return out


def _restart_policy(job: JobSpec) -> str:
    # The operator re-creates failed pods up to runPolicy.backoffLimit times.
    return "OnFailure" if job.max_restarts > 0 else "Never"


# The distribution types whose whole job restarts on the training operator's v1 kinds: ddp
# through torchrun's elastic agent (pytorch_restarts_env), mpi/horovod because an MPIJob's failed
# launcher is re-created and runs mpirun over every worker again.  A restarted pod of any other
# type would rejoin nothing (deepspeed's and ray's static rendezvous, a TFJob's fixed cluster).
WHOLE_JOB_RESTARTS = ("ddp", "mpi", "horovod")


def pytorch_restarts_env(job: JobSpec) -> Dict[str, str]:
    """The operator restarts only a failed pod (restartPolicy OnFailure; training-operator
    pkg/controller.v1/common/pod.go, ReconcilePods), which cannot rejoin a static rendezvous.  With
    restarts asked for, ``ddp`` nodes run torchrun's elastic agent (c10d, ``--max-restarts``): a
    re-created pod joins the next round and every worker restarts from the last checkpoint."""
    if job.distribution.type == "ddp" and job.max_restarts > 0:
        return {"CLOUDTRAIN_MAX_RESTARTS": str(job.max_restarts)}
    return {}


def pytorch_job(job: JobSpec, options: ManifestOptions, bundle: Mapping[str, str]) -> dict:
    """``kubeflow.org/v1`` PyTorchJob: Master (1) + Worker (nodes-1); each pod is one node."""
    d = job.distribution
    name = object_name(job, options)
    cmd = node_shell(launch_command(job, options), options=options)
    port = [{"name": "pytorchjob-port", "containerPort": options.master_port, "protocol": "TCP"}]
    # "when master is succeed, the job is finished" and cleanPodPolicy Running deletes the rest
    # (training-operator v1.9.0 pkg/controller.v1/pytorch/pytorchjob_controller.go UpdateJobStatus;
    # common/job.go).  Without a Master a PyTorchJob succeeds when every Worker has (same function,
    # `expected == 0`): `none`, whose nodes run independent commands, is Workers only, so every
    # node's work finishes before the job is a success.  The operator then sets no MASTER_ADDR nor
    # RANK (pytorch/envvar.go setPodEnv): each pod's index comes from its replica-index label.
    #
    # An elasticPolicy needs a Worker replica ("must be configured if elastic policy is used",
    # v1.9.0 pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchSpec) and a Worker replica
    # count is at least 1 (validatePyTorchReplicaSpecs): a one-node elastic ddp job is one Worker.
    elastic = d.type == "ddp" and (job.max_restarts > 0 or d.min_nodes is not None)
    independent = d.type == "none" or (elastic and d.nodes == 1)
    replicas = {"Worker": d.nodes} if independent else {"Master": 1, "Worker": d.nodes - 1}
    specs = {}
    for role, count in replicas.items():
        if count <= 0:
            continue
        extra = {"CLOUDTRAIN_KUBEFLOW_KIND": "PyTorchJob", "CLOUDTRAIN_KUBEFLOW_ROLE": role.lower(),
                 **pytorch_restarts_env(job)}
        if independent:
            extra["CLOUDTRAIN_HOSTS"] = ",".join("%s-worker-%d" % (name, i) for i in range(d.nodes))
        c = container(job, options, "pytorch", cmd, ports=port, extra_env=extra)
        if independent:
            c["env"].append(downward_env("CLOUDTRAIN_REPLICA_INDEX", "metadata.labels['%s']" % REPLICA_INDEX_LABEL))
        specs[role] = {"replicas": count, "restartPolicy": _restart_policy(job),
                       "template": pod_template(job, options, role.lower(), [c], bundle)}
    spec: Dict[str, Any] = {"pytorchReplicaSpecs": specs, "nprocPerNode": str(job.procs_per_node),
                            "runPolicy": _run_policy(job, options, gang_size(job))}
    if elastic:
        # A node range (or restarts) asks for c10d rendezvous across re-created pods.  The store is
        # node 0's (the launcher's --rdzv-endpoint is the master's): without rdzvHost the operator's
        # PET_RDZV_ENDPOINT would name <job>-worker-0 (pkg/controller.v1/pytorch/elastic.go).
        spec["elasticPolicy"] = {"minReplicas": d.min_nodes or d.nodes, "maxReplicas": d.nodes,
                                 "rdzvBackend": "c10d",
                                 "rdzvHost": "%s-%s-0" % (name, "worker" if independent else "master"),
                                 "rdzvPort": options.master_port, "rdzvId": name}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


def mpi_job(job: JobSpec, options: ManifestOptions, bundle: Mapping[str, str]) -> dict:
    """``kubeflow.org/v2beta1`` MPIJob: a Launcher pod runs ``cloudtrain launch --type mpi|horovod``
    (its detector reads the operator's hostfile; it runs mpirun/horovodrun over the workers);
    ``nodes`` Worker pods run sshd, mpirun's remote agent, with ``procs_per_node`` slots each."""
    d = job.distribution
    name = object_name(job, options)
    env = {"CLOUDTRAIN_KUBEFLOW_KIND": "MPIJob"}
    # launcherCreationPolicy (mpi-operator >= 0.5.0) makes the operator create the launcher once
    # the workers are ready; older CRDs (0.4.0, the one AWS's Horovod/PyTorch post installs) prune
    # it and the launcher starts at once, so the launcher itself also waits until every worker's
    # sshd answers (port 22).
    launcher = container(job, options, "launcher", node_shell(launch_command(job, options), ssh=True, options=options),
                         compute=False, extra_env={**env, "CLOUDTRAIN_KUBEFLOW_ROLE": "launcher",
                                                   SSH_WAIT: str(SSHD_PORT)})
    # mpirun starts the ranks in the launcher's working directory: the workers unpack the code there too
    sshd = "mkdir -p /run/sshd && exec /usr/sbin/sshd -De -o StrictModes=no"
    unpack = unpack_step(options)
    shell = f"export {launcher_path(LAUNCHER_DIR)}; {unpack} && {sshd}" if unpack else sshd
    worker = container(job, options, "worker", ["/bin/sh", "-c", shell],
                       extra_env={**env, "CLOUDTRAIN_KUBEFLOW_ROLE": "worker"})
    specs = {
        "Launcher": {"replicas": 1, "restartPolicy": _restart_policy(job),
                     "template": pod_template(job, options, "launcher", [launcher], bundle)},
        "Worker": {"replicas": d.nodes, "restartPolicy": _restart_policy(job),
                   "template": pod_template(job, options, "worker", [worker], bundle)},
    }
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {"slotsPerWorker": job.procs_per_node, "sshAuthMountPath": options.ssh_auth_mount_path,
                     "mpiImplementation": "OpenMPI", "launcherCreationPolicy": "WaitForWorkersReady",
                     "runPolicy": _run_policy(job, options, d.nodes + 1), "mpiReplicaSpecs": specs}}


def tf_job(job: JobSpec, options: ManifestOptions, bundle: Mapping[str, str]) -> dict:
    """``kubeflow.org/v1`` TFJob: PS (ps) + Worker (nodes - ps); the operator's TF_CONFIG is used."""
    d = job.distribution
    name = object_name(job, options)
    cmd = node_shell(launch_command(job, options), options=options)
    specs = {}
    for role, count in (("PS", job.ps), ("Worker", d.nodes - job.ps)):
        c = container(job, options, "tensorflow", cmd,
                      extra_env={"CLOUDTRAIN_KUBEFLOW_KIND": "TFJob", "CLOUDTRAIN_KUBEFLOW_ROLE": role.lower()})
        specs[role] = {"replicas": count, "restartPolicy": _restart_policy(job),
                       "template": pod_template(job, options, role.lower(), [c], bundle)}
    # Without a successPolicy the TFJob succeeds when worker 0 completes and cleanPodPolicy Running
    # deletes the other workers mid-run; AllWorkers waits for every worker (training-operator
    # v1.9.0 pkg/controller.v1/tensorflow/tfjob_controller.go UpdateJobStatus, IsWorker0Completed;
    # pkg/apis/kubeflow.org/v1/tensorflow_types.go SuccessPolicyAllWorkers).
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"tfReplicaSpecs": specs, "successPolicy": "AllWorkers",
                     "runPolicy": _run_policy(job, options, d.nodes)}}


def kubeflow_job(job: JobSpec, options: ManifestOptions, bundle: Mapping[str, str]) -> dict:
    t = job.distribution.type
    if t in ("mpi", "horovod"):
        obj = mpi_job(job, options, bundle)
    elif t == "ps-worker":
        obj = tf_job(job, options, bundle)
    else:
        # ddp; deepspeed: every node runs `cloudtrain launch --type deepspeed`, i.e. the deepspeed
        # launcher with --no_ssh and its own node rank, so it needs PyTorchJob's one-pod-per-node
        # shape with stable names, not an MPIJob's ssh fan-out (no sshd needed in the image);
        # ray and none: the launcher forms the Ray cluster / runs the command on every node itself.
        obj = pytorch_job(job, options, bundle)
    if kueue_labels(options):
        obj["metadata"]["labels"] = kueue_labels(options)
    return obj


def build_kubeflow(job: JobSpec, options=None, bundle: Optional[Mapping[str, str]] = None) -> List[dict]:
    """``[Secret?, ConfigMap, PyTorchJob | MPIJob | TFJob]`` for ``job``."""
    options = ManifestOptions.of(options)
    bundle = launcher_bundle(options.detector_targets) if bundle is None else bundle
    out = [secret_manifest(job, options), launcher_configmap(job, options, bundle), code_source(job, options),
           stamp(kubeflow_job(job, options, bundle), job, options)]
    return [o for o in out if o is not None]


# -- Volcano -------------------------------------------------------------------------------------
def volcano_tasks(job: JobSpec) -> List[Tuple[str, int]]:
    """``[(task name, replicas)]`` in node-rank order (zero-replica tasks left out)."""
    d = job.distribution
    t = d.type
    if t == "ps-worker":
        tasks = [("ps", job.ps), ("worker", d.nodes - job.ps)]
    else:
        first = {"mpi": "launcher", "horovod": "launcher", "ray": "head"}.get(t, "master")
        tasks = [(first, 1), ("worker", d.nodes - 1)]
    return [(n, r) for n, r in tasks if r > 0]


# The job's headless Service publishes a pod's DNS record before the pod is Ready: a pod's record
# otherwise appears only once its image is pulled and it runs, minutes after its peers look it up.
# The svc plugin's flag sets the Service's publishNotReadyAddresses (volcano-sh/volcano
# pkg/controllers/job/plugins/svc/svc.go: addFlags, createServiceIfNotExist).
VOLCANO_SVC_ARGS = ("--publish-not-ready-addresses=true",)


# How often Volcano restarted the job: its controller writes the Job's status.retryCount on every
# pod it creates as the annotation volcano.sh/job-retry-count (volcano-sh/volcano >= v1.11.0,
# pkg/controllers/job/job_controller_util.go createJobPod: ``pod.Annotations[batch.JobRetryCountKey]``;
# staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/labels.go JobRetryCountKey), incremented by
# the RestartJob action (pkg/controllers/job/state/running.go).  The downward API gives it to the
# container (an annotation an older Volcano does not write reads as ""); the detector maps it to
# CLOUDTRAIN_RESTART_COUNT (detect.py).
VOLCANO_RETRY_ANNOTATION = "volcano.sh/job-retry-count"
VOLCANO_RETRY_ENV = "CLOUDTRAIN_VOLCANO_RETRY_COUNT"


def downward_env(name: str, field_path: str) -> dict:
    """A container env entry read from the pod's own object (the downward API's ``fieldRef``)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def volcano_job(job: JobSpec, options: ManifestOptions, bundle: Mapping[str, str]) -> dict:
    """``batch.volcano.sh/v1alpha1`` Job: one pod per node, every pod runs the launcher."""
    d = job.distribution
    name = object_name(job, options)
    tasks = volcano_tasks(job)
    ssh = d.type in ("mpi", "horovod") and d.nodes > 1
    # node 0's mpirun/horovodrun reaches the others over ssh (keys: the `ssh` plugin)
    cmd = node_shell(launch_command(job, options), sshd=ssh, options=options)
    env = {"CLOUDTRAIN_VOLCANO_TASKS": ",".join(n for n, _ in tasks)}
    if ssh:  # pods start at their own pace: node 0 waits for every pod's sshd before mpirun
        env[SSH_WAIT] = str(SSHD_PORT)
    restart = job.max_restarts > 0
    out_tasks = []
    for task, replicas in tasks:
        c = container(job, options, "cloudtrain", cmd, extra_env={**env, "CLOUDTRAIN_VOLCANO_TASK": task})
        c["env"].append(downward_env(VOLCANO_RETRY_ENV, "metadata.annotations['%s']" % VOLCANO_RETRY_ANNOTATION))
        entry: Dict[str, Any] = {"name": task, "replicas": replicas,
                                 "template": pod_template(job, options, task, [c], bundle, restart_policy="Never")}
        if job.max_runtime:  # Volcano's Job has no deadline of its own: each attempt's pods get it
            entry["template"]["spec"]["activeDeadlineSeconds"] = job.max_runtime
        # The job ends when the node that runs the command ends: node 0 for mpi/horovod/ray
        # (the others wait on it), the workers for ps-worker (parameter servers never exit).
        if (task == tasks[0][0] and d.type in ("mpi", "horovod", "ray")) or \
                (d.type == "ps-worker" and task == "worker"):
            entry["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
        out_tasks.append(entry)
    plugins: Dict[str, List[str]] = {"svc": list(VOLCANO_SVC_ARGS), "env": []}
    if ssh:
        plugins["ssh"] = []
    plugins.update({k: list(v) for k, v in options.volcano_plugins.items()})
    spec: Dict[str, Any] = {
        "schedulerName": options.scheduler_name,
        "queue": options.queue or "default",
        **({"priorityClassName": options.priority_class} if options.priority_class else {}),
        "minAvailable": gang_size(job),
        "maxRetry": job.max_restarts,
        "plugins": plugins,
        "policies": [{"event": "PodFailed", "action": "RestartJob" if restart else "AbortJob"},
                     {"event": "PodEvicted", "action": "RestartJob" if restart else "AbortJob"}],
        "tasks": out_tasks,
    }
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def build_volcano(job: JobSpec, options=None, bundle: Optional[Mapping[str, str]] = None,
                  kubelet: bool = True) -> List[dict]:
    """``[Secret?, ConfigMap, Job]`` for ``job`` (every distribution type).  ``kubelet=False``: the
    Job's commands are not escaped yet (modelarts-lite reshapes it, then stamps it)."""
    options = ManifestOptions.of({"provider": "volcano"} if options is None else options)
    bundle = launcher_bundle(options.detector_targets) if bundle is None else bundle
    out = [secret_manifest(job, options), launcher_configmap(job, options, bundle), code_source(job, options),
           stamp(volcano_job(job, options, bundle), job, options, kubelet=kubelet)]
    return [o for o in out if o is not None]
