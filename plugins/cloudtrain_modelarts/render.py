"""What ``modelarts`` and ``modelarts-lite`` send, built from a job and its options (pure: no SDK,
no network, no clock, no credentials; secrets as ``***``).

``modelarts`` (Standard): ``ModelartsRequest``, the body of ``CreateTrainingJobRequest`` (a
``Job``, exactly as the SDK's request model takes it) and, unless ``code_dir`` names code staged by
hand, where the code archive goes (``code_upload``: alone in a content-addressed OBS directory,
``<store>/cloudtrain-code/<code-digest>/code/code.tar.gz``, which becomes ``algorithm.code_dir``).
``check`` is every refusal a render makes; ``submitted_body`` is the body a submit sends (the
spec-hash name and description, the secrets' values).

``modelarts-lite``: the Volcano Job of Huawei's ranktable-routing guide, reshaped from the
kubernetes plugin's ``build_volcano`` (``build_lite``); the kubernetes plugin loads only when
these are called, never for ``modelarts``.
"""
from __future__ import annotations

import copy
import json
import posixpath
import re
import shlex
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from cloudtrain.transfer import shipping, storage
from cloudtrain.spec.accelerators import is_npu
from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.catalogs.instances import _minimums, check_minimums, choose, smallest_cpu, wanted
from cloudtrain.spec.job import JobSpec
from cloudtrain.launch import sshd
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.launch.unpack import bootstrap_argv
from cloudtrain.transfer.objectstore import CODE_FOLDER, ObjectUrl
from cloudtrain.providers.provider import Provider
from cloudtrain.providers.request import Artifact, CodeUpload, Placeholder, Request
from cloudtrain.input.secrets import MASK
from cloudtrain.transfer.shipping import launcher_path
from cloudtrain.providers.survival import checkpoint_uri, field_error

from . import catalog
from .detect import LITE, MA_JOB_DIR, ROUTED, STANDARD, TASK
from .options import ASCEND, DEFAULT_REGION, NPU_RESOURCE, OPEN_SCRIPT, ModelartsOptions, ObsData  # noqa: F401
# (DEFAULT_REGION and OPEN_SCRIPT: modelarts-lite's defaults, kept importable from here)

if TYPE_CHECKING:
    from cloudtrain_kubernetes.manifests import ManifestOptions

    from .liteoptions import LiteOptions

# -- modelarts (Standard) ------------------------------------------------------------------------
KIND = "modelarts/CreateTrainingJob"
UPLOAD_KIND = "obs/PutObject"
HASH_MARK = "cloudtrain:spec-hash="
MAX_ENV = 100
CHECKPOINT_DIR = "/cache/cloudtrain-checkpoint"  # where storage.checkpoint's OBS path is mounted
CODE_NAME = "code"              # the last part of the shipped code_dir: $MA_JOB_DIR/code
ARCHIVE = "code.tar.gz"
STORE_PLACEHOLDER = "<providers.modelarts.code_store>"
CPU_AT_SUBMIT = "<chosen at submit: "  # a CPU job's flavor (cpu_at_submit)
# where storage.inputs / storage.output appear in the container (the SDK's Input.local_dir example:
# "/home/ma-user/modelarts/inputs/data_url_0")
INPUTS_DIR = "/home/ma-user/modelarts/inputs"
OUTPUT_DIR = "/home/ma-user/modelarts/outputs/cloudtrain_output"
OUTPUT_CHANNEL = "cloudtrain_output"

# Huawei: ModelArts runs a custom image as ma-user (uid 1000; "the default user of a custom image
# must be the user whose UID is 1101" in older releases), and public pools do not start it as
# root; the launcher's --sshd (cloudtrain.launch.sshd) starts the image's sshd only as root.
SSH_AS_MA_USER = ("is mpi/horovod on several nodes: node 0's mpirun reaches the others over ssh, but ModelArts "
                  "Standard runs a custom image as ma-user (uid 1000) and cloudtrain starts a node's sshd only as "
                  "root, so no node would listen and node 0 would wait in vain; use ddp or deepspeed (torchrun, no "
                  "ssh), or set providers.modelarts.image_runs_as_root: true if your image and pool run as root")
RDMA_ON = ("is on, but ModelArts Standard's training-job API has no RDMA field (spec.resource takes flavor_id, "
           "node_count and pool_id only): RoCE or InfiniBand comes with the flavor or the dedicated pool's nodes, "
           "and the job uses it when they have it; set network.rdma: auto (with providers.modelarts.pool_id for a "
           "pool of RDMA nodes)")
SPOT_MEANING = ("spot on ModelArts is schedule_policy.preemptible: the job may be preempted by higher-priority jobs "
                "in your own dedicated pool; it is not discounted capacity (ModelArts Standard has no spot pricing "
                "for training jobs)")
# the card a flavor id names, e.g. modelarts.vm.gpu.8v100, modelarts.bm.npu.arm.8snt9b3.d
FLAVOR_CARDS = (("v100", "V100"), ("a100", "A100"), ("h100", "H100"), ("t4", "T4"), ("snt9b", "Ascend-910B"),
                ("910b", "Ascend-910B"))


@dataclass(frozen=True)
class ModelartsRequest(Request):
    """A ModelArts Standard submit: ``body`` is ``CreateTrainingJobRequest``'s ``Job`` as rendered
    (the name without the spec hash, secrets as ``***``); ``upload`` where the code archive goes
    (None: ``code_dir`` names code staged by hand)."""

    name: str
    body: Dict[str, Any]
    upload: Optional[CodeUpload] = None

    def artifacts(self) -> List[Artifact]:
        out = [Artifact(KIND, self.name, self.body)]
        if self.upload is not None:
            url = ObjectUrl.parse(self.upload.url)
            out.insert(0, Artifact(UPLOAD_KIND, "code", {"Bucket": url.bucket, "Key": url.key,
                                                         "ContentType": "application/gzip"}))
        return out

    @property
    def code_upload(self) -> Optional[CodeUpload]:
        return self.upload


def flavor_card(flavor: str) -> Optional[str]:
    """The chip a flavor id names (``8v100`` -> V100), or None."""
    for token, name in FLAVOR_CARDS:
        if re.search(rf"(?:^|[.\d]){token}(?:$|[.u\d])", flavor.lower()):
            return name
    return None


def flavor_count(flavor: str) -> Optional[int]:
    """The card count a flavor id names (``modelarts.vm.gpu.8v100`` -> 8), or None (``.p3.large``)."""
    for token, _ in FLAVOR_CARDS:
        found = re.search(rf"(?:^|\.)(\d+){token}(?:$|[.u\d])", flavor.lower())
        if found:
            return int(found.group(1))
    return None


def chip(accelerator: str) -> str:
    """``A100-80GB`` -> ``A100`` (a flavor id names the chip, not its memory size)."""
    return accelerator if accelerator.startswith("Ascend") else accelerator.split("-")[0]


def obs_dir(url: str) -> str:
    """``obs://bucket/dir`` -> ``/bucket/dir/`` (the form ModelArts' v2 API takes)."""
    path = url[len("obs://"):] if url.startswith("obs://") else url.lstrip("/")
    return "/" + path.rstrip("/") + "/"


def obs_object(uri: str) -> str:
    """``obs://bucket/key`` -> ``/bucket/key`` (a trailing ``/``, a directory, kept as given)."""
    return "/" + uri[len("obs://"):].lstrip("/")


def code_object(code_store: Optional[str], digest: str = Placeholder.CODE_DIGEST) -> ObjectUrl:
    """Where the archive of sha256 ``digest`` goes: alone in a directory, ModelArts' ``code_dir``."""
    prefix = ObjectUrl.parse(code_store, "providers.modelarts.code_store") if code_store \
        else ObjectUrl("obs", STORE_PLACEHOLDER)
    return prefix.child(CODE_FOLDER, digest, CODE_NAME, ARCHIVE)


def option(name: str) -> tuple:
    """Where ``providers.modelarts.<name>`` is in a job (for ``JobFileError.at``)."""
    return ("providers", STANDARD, name)


def over_ssh(job: JobSpec) -> bool:
    """Does node 0's mpirun/horovodrun reach other nodes (over ssh: ModelArts has no MPI operator)?"""
    return job.distribution.type in ("mpi", "horovod") and job.distribution.nodes > 1


def accelerator(job: JobSpec) -> Optional[str]:
    """The job's accelerator: resources.accelerator, else the one its resources.instance_type names."""
    if job.resources.accelerator:
        return job.resources.accelerator
    found = wanted(job, catalog.RULES) if job.resources.instance_type else None
    return found[0] if found else None


def workdir(options: ModelartsOptions) -> str:
    """Where the code lands: ModelArts downloads ``code_dir`` into ``$MA_JOB_DIR``."""
    name = posixpath.basename(obs_dir(options.code_dir).rstrip("/")) if options.code_dir else CODE_NAME
    return f"{MA_JOB_DIR}/{name}"


def environments(job: JobSpec, options: ModelartsOptions, detectors: str) -> Dict[str, str]:
    """``algorithm.environments``: cloudtrain's own variables, then the job's env (secrets as
    ``***``).  ``detectors``: ``CLOUDTRAIN_DETECTORS`` (``Provider.detectors_variable``)."""
    env = {
        "CLOUDTRAIN_DETECTORS": detectors,
        "CLOUDTRAIN_MASTER_PORT": str(options.master_port),
        "CLOUDTRAIN_JOB_ID": job.name,
        "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
    }
    if over_ssh(job):  # every node starts its sshd (launch --sshd); node 0 waits for them all
        env.update({"OMPI_MCA_plm_rsh_args": sshd.CLIENT_OPTIONS, SSH_WAIT: str(sshd.SSHD_PORT)})
    if job.network.rdma == "off":  # NCCL over TCP sockets only (check_network: not on Ascend)
        env["NCCL_IB_DISABLE"] = "1"
    if job.storage.checkpoint:
        env["CLOUDTRAIN_CHECKPOINT_DIR"] = CHECKPOINT_DIR
    for name in job.storage.inputs:  # ModelArts downloads input <name> here before the command
        env[storage.input_env(name)] = f"{INPUTS_DIR}/{name}"
    if job.storage.output:           # and uploads this directory to storage.output
        env[storage.OUTPUT_ENV] = OUTPUT_DIR
    env.update(Provider.rendered_env(job))
    return env


def flavor(job: JobSpec, options: ModelartsOptions) -> Optional[str]:
    """A dedicated pool's ``modelarts.pool.visual.<n>xlarge`` (or ``flavor_id``), else the
    public flavor: ``flavor_id`` checked against the catalog, or resolved from ``resources``
    (another platform's instance type is translated, never sent raw)."""
    if options.pool_id:
        return catalog.pool_flavor(job, options.flavor_id, options.pool_id)
    choice = choose(job, catalog.RULES, options.flavor_id)
    if options.flavor_id:
        loc = option("flavor_id")
        check_minimums(job, catalog.RULES, choice, loc)
        if choice is not None and choice.row is None:
            check_flavor_card(job, choice.instance_type, loc)
    choice = choice or smallest_cpu(job, catalog.RULES)
    return choice.instance_type if choice else cpu_at_submit(job)


def cpu_at_submit(job: JobSpec) -> Optional[str]:
    """What ``spec.resource.flavor_id`` shows for a job that asks for no accelerator when the
    catalog has no CPU flavor: submit takes the region's smallest CPU training flavor with the
    job's minimums (``ModelartsProvider.cpu_flavor``); None for a job that asks for cards."""
    r = job.resources
    if r.accelerator or r.gpus_per_node or r.instance_type:
        return None
    wants = f" with >= {_minimums(r).replace('GiB', 'GB')}" if (r.cpus_per_node or r.memory_gb) else ""
    return f"{CPU_AT_SUBMIT}the smallest CPU flavor{wants}>"


def chosen_at_submit(flavor_id: Optional[str]) -> bool:
    """Is ``flavor_id`` the placeholder of ``cpu_at_submit``?"""
    return flavor_id is not None and flavor_id.startswith(CPU_AT_SUBMIT)


def check_flavor_card(job: JobSpec, flavor: str, loc: tuple) -> None:
    """A flavor the catalog lacks, whose id names a card (``modelarts.vm.gpu.8v100``) other than
    the job's accelerator: exit 2 naming both, never a silent override."""
    named = flavor_card(flavor)
    asked = accelerator(job)
    field = "resources.accelerator" if job.resources.accelerator else "resources.instance_type"
    if named and asked and chip(asked) != named:
        raise JobFileError.at(job, loc, f"{flavor} names a {named} flavor, but the job asks for {asked} "
                                        f"({field}); make them agree, or drop flavor_id and let resources choose")
    cards, r = flavor_count(flavor), job.resources
    if cards and r.gpus_per_node and cards != r.gpus_per_node:
        raise JobFileError.at(job, loc, f"{flavor} names {cards} cards per node, but resources.gpus_per_node is "
                                        f"{r.gpus_per_node}; make them agree, or drop flavor_id and let resources "
                                        "choose")
    if r.cpus_per_node or r.memory_gb:  # a flavor newer than the catalog: its size is the platform's to know
        warnings.warn(f"{'.'.join(loc)}: {flavor} is not in cloudtrain's ModelArts catalog, so its vCPUs and memory "
                      f"are unknown offline: resources.cpus_per_node/memory_gb ({_minimums(r)}) are not checked "
                      "against it (cloudtrain catalog refresh -p modelarts)", CloudtrainWarning, stacklevel=3)


# -- the checks a render makes (exit 2 at the field) ---------------------------------------------
def check(job: JobSpec, options: ModelartsOptions, detectors: str) -> None:
    """Everything a render refuses, raised at its field, and what it warns about."""
    if not (options.image or job.image):
        raise JobFileError.at(job, ("image",), "ModelArts Standard runs a custom image: set `image` (an SWR image) "
                                               "or providers.modelarts.image")
    env = environments(job, options, detectors)
    if len(env) > MAX_ENV:
        raise JobFileError.at(job, ("env",), f"ModelArts takes at most {MAX_ENV} environment variables, this job "
                                             f"has {len(env)} (with cloudtrain's own); drop some")
    if over_ssh(job) and not options.image_runs_as_root:
        raise JobFileError.at(job, ("distribution", "type"), SSH_AS_MA_USER)
    check_network(job)
    if over_ssh(job):
        warnings.warn("mpi/horovod on ModelArts Standard: node 0's mpirun reaches the other nodes over ssh, which "
                      "a custom image must allow (Huawei: without passwordless ssh between the nodes, training "
                      "fails); cloudtrain starts the image's sshd on every node (root, /usr/sbin/sshd) and waits for "
                      "it, but the image must hold a key pair shared by its nodes (~/.ssh/id_* with the public key in "
                      "authorized_keys)", CloudtrainWarning)
    r = job.resources
    if options.pool_id and (r.cpus_per_node or r.memory_gb):
        # spec.resource on a pool takes a flavor_id (cards per node); the SDK's
        # main_container_customized_flavor (cpu_core_num, mem_size) documents no units, so it is not sent
        warnings.warn(f"resources.cpus_per_node/memory_gb are not sent on dedicated pool {options.pool_id}: the "
                      "pool's flavor (modelarts.pool.visual.<n>xlarge) sizes each node", CloudtrainWarning)
    check_survival(job, options)
    if job.spot:  # after check_survival, which refuses spot without a pool: no warning before that error
        warnings.warn(SPOT_MEANING, CloudtrainWarning)
    check_code(job, options)
    check_storage(job, options)
    reserved = sorted(k for k in [*job.env, *job.secrets] if k.startswith("MA_"))
    if reserved:
        warnings.warn(f"{', '.join(reserved)}: ModelArts reserves MA_* variables; rename them", CloudtrainWarning)
    chosen = flavor(job, options)  # whatever else render would refuse (the flavor), validate refuses too
    if chosen is not None and chosen_at_submit(chosen):
        warnings.warn(f"{'.'.join(option('flavor_id'))} is not set and the job asks for no accelerator: submit takes "
                      f"{chosen[len(CPU_AT_SUBMIT):-1]} the region lists (ShowTrainingJobFlavors, flavor_type CPU) "
                      f"for {job.distribution.nodes} node(s); set flavor_id to choose one yourself", CloudtrainWarning)


def check_survival(job: JobSpec, options: ModelartsOptions) -> None:
    """spec.auto_stop counts whole hours (the SDK's AutoStop: time_unit HOURS, duration >= 1);
    spot is schedule_policy.preemptible, which a dedicated pool honours; checkpoints are an
    OBS volume (spec.volumes[].obs)."""
    if job.max_runtime is not None and job.max_runtime % 3600:
        hours = -(-job.max_runtime // 3600)
        raise field_error(job, ("max_runtime",), f"ModelArts stops a job after whole hours (spec.auto_stop, "
                                                 f"time_unit HOURS); {job.max_runtime_text} is not: use {hours}h")
    if job.spot and not options.pool_id:
        raise field_error(job, ("spot",), "ModelArts has no spot training on its public pools; a job on a "
                                          "dedicated pool can be preemptible (schedule_policy.preemptible): set "
                                          "providers.modelarts.pool_id, or drop spot")
    checkpoint_uri(job, "ModelArts", ("obs",), "obs://team-ckpt/digits/")


def check_network(job: JobSpec) -> None:
    """resources.shm_gb has no field: exit 2.  network.rdma: the training-job API has no RDMA field
    (the SDK's Job, Spec and SpecResource: flavor_id, node_count, pool_id, pool_group_id), so
    ``on`` cannot be requested: the nodes' RoCE/InfiniBand is the flavor's or the pool's.  ``off``
    becomes NCCL_IB_DISABLE=1 (NCCL only: Ascend's HCCL has no such switch)."""
    if job.resources.shm_gb:  # the SDK's Job has no /dev/shm size (spec.resource: flavor_id, node_count, pool_id)
        raise JobFileError.at(job, ("resources", "shm_gb"), "ModelArts Standard's training-job API has no /dev/shm "
                              "setting (the flavor sizes it), so shm_gb would be ignored; drop it for this provider "
                              "(--set resources.shm_gb=null)")
    mode = job.network.rdma
    if mode == "on":
        raise JobFileError.at(job, ("network", "rdma"), RDMA_ON)
    chip = accelerator(job) if mode == "off" else None  # None: a CPU job (NCCL_IB_DISABLE=1 as on GPUs)
    if chip is not None and is_npu(chip):
        raise JobFileError.at(job, ("network", "rdma"), "is off, but Ascend NPUs reach each other over their own "
                              "RoCE ports (HCCL), which a training job cannot turn off; set network.rdma: auto")


def check_code(job: JobSpec, options: ModelartsOptions) -> None:
    if options.code_dir and options.code_store:
        raise JobFileError.at(job, option("code_dir"), "and code_store are both set: code_dir names code staged by "
                              "hand, code_store where submit uploads it; keep one")


def check_storage(job: JobSpec, options: ModelartsOptions) -> None:
    """storage.inputs become channels named after the input, storage.output the channel
    ``cloudtrain_output``: providers.modelarts.inputs/outputs must not name them too."""
    named = {item.name for item in options.inputs}
    for name in sorted(job.storage.inputs):
        if name in named:
            raise JobFileError.at(job, ("storage", "inputs", name), f"becomes the ModelArts input {name!r}, which "
                                  "providers.modelarts.inputs names too; rename one of them")
    if job.storage.output and OUTPUT_CHANNEL in {item.name for item in options.outputs}:
        raise JobFileError.at(job, ("storage", "output"), f"becomes the ModelArts output {OUTPUT_CHANNEL!r}, which "
                              "providers.modelarts.outputs names too; rename that one")


# -- the request ---------------------------------------------------------------------------------
def data_channel(item: ObsData) -> dict:
    """An ``algorithm.inputs``/``outputs`` entry from ``providers.modelarts.inputs``/``outputs``."""
    out: Dict[str, Any] = {"name": item.name, "access_method": item.access_method}
    if item.local_dir:
        out["local_dir"] = item.local_dir
    out["remote"] = {"obs": {"obs_url": obs_dir(item.obs_url)}}
    return out


def command(job: JobSpec, options: ModelartsOptions) -> str:
    """``algorithm.command``: into the code directory, the shipped archive's sha256 checked and
    unpacked by cloudtrain's own unpacker (``unpack.BOOTSTRAP``: no cloudtrain in the image), then
    the launcher.  ``Placeholder.CODE_DIGEST`` sits inside ``shlex.join``'s quotes: the digest
    (hex) fills it as it is."""
    unpack = "" if options.code_dir else \
        shlex.join(bootstrap_argv(options.python, Placeholder.CODE_DIGEST, ARCHIVE, ".")) + " && "
    return (f"cd {shlex.quote(workdir(options))} && {unpack}"
            + shipping.node_command(job, platform=STANDARD, python=options.python, sshd=over_ssh(job)))


MAX_JOB_RETRIES = 128  # fault-tolerance/job-retry-num: 1 to 128 (ModelArts user guide, develop-modelarts-0041)


def body(job: JobSpec, options: ModelartsOptions, detectors: str) -> dict:
    """``CreateTrainingJobRequest``'s ``Job`` for ``job``, as rendered."""
    metadata: Dict[str, Any] = {"name": job.name,
                                "description": options.description or f"cloudtrain job {job.name}"}
    if options.workspace_id:
        metadata["workspace_id"] = options.workspace_id
    if job.max_restarts > 0:
        # Restart the whole job after any failure (not only the platform's hardware faults).
        # "set fault-tolerance/job-retry-num to a value ranging from 1 to 128", and unconditional
        # restarts stop after three in a row (Huawei Cloud ModelArts user guide, "Enabling
        # Unconditional Auto Restart", develop-modelarts-0041): more is refused, never sent.
        if job.max_restarts > MAX_JOB_RETRIES:
            from cloudtrain.spec.errors import JobFileError
            raise JobFileError.at(job, ("max_restarts",), f"is {job.max_restarts}; ModelArts restarts a job at most "
                                  f"{MAX_JOB_RETRIES} times (fault-tolerance/job-retry-num 1-{MAX_JOB_RETRIES}), and "
                                  "unconditional restarts stop after 3 in a row; lower it")
        metadata["annotations"] = {"fault-tolerance/job-retry-num": str(job.max_restarts),
                                   "fault-tolerance/job-unconditional-retry": "true"}
    algorithm: Dict[str, Any] = {
        "command": command(job, options),
        "engine": {"image_url": options.image or job.image},
        "environments": environments(job, options, detectors),
        "working_dir": workdir(options),
        "code_dir": obs_dir(options.code_dir) if options.code_dir else
        obs_object(str(code_object(options.code_store))).rsplit("/", 1)[0] + "/",
    }
    channels = {"inputs": [data_channel(item) for item in options.inputs],
                "outputs": [data_channel(item) for item in options.outputs]}
    for name, uri in sorted(job.storage.inputs.items()):
        channels["inputs"].append({"name": name, "access_method": "env", "local_dir": f"{INPUTS_DIR}/{name}",
                                   "remote": {"obs": {"obs_url": obs_object(uri)}}})
    if job.storage.output:
        channels["outputs"].append({"name": OUTPUT_CHANNEL, "access_method": "env", "local_dir": OUTPUT_DIR,
                                    "remote": {"obs": {"obs_url": obs_dir(job.storage.output)}}})
    algorithm.update({key: items for key, items in channels.items() if items})
    resource: Dict[str, Any] = {"node_count": job.distribution.nodes}
    chosen = flavor(job, options)
    if chosen:
        resource["flavor_id"] = chosen
    if options.pool_id:
        resource["pool_id"] = options.pool_id
    spec: Dict[str, Any] = {"resource": resource}
    if options.log_export_path:
        spec["log_export_path"] = {"obs_url": obs_dir(options.log_export_path)}
    if options.priority is not None or job.spot:
        spec["schedule_policy"] = {k: v for k, v in (("priority", options.priority), ("preemptible", job.spot or None))
                                   if v is not None}
    if job.max_runtime is not None:
        spec["auto_stop"] = {"time_unit": "HOURS", "duration": job.max_runtime // 3600}
    if job.storage.checkpoint:  # the same OBS path for every attempt: what one saved, the next sees
        spec["volumes"] = [{"obs": {"obs_path": obs_dir(job.storage.checkpoint).rstrip("/"),
                                    "local_path": CHECKPOINT_DIR}}]
    return {"kind": "job", "metadata": metadata, "algorithm": algorithm, "spec": spec}


def build(job: JobSpec, options: ModelartsOptions, detectors: str) -> ModelartsRequest:
    """The typed request of a ``modelarts`` job."""
    upload = None if options.code_dir else CodeUpload(str(code_object(options.code_store)), region=options.region)
    return ModelartsRequest(job.name, body(job, options, detectors), upload)


def submitted_body(request: ModelartsRequest, secrets: Dict[str, str], spec: str) -> dict:
    """The body a submit sends (a copy of the filled request's): its name ends with the spec hash's
    first 8 digits and its description holds the whole hash (``HASH_MARK``, what a later submit
    finds it by); ``secrets``' values in place of their ``***``."""
    sent = json.loads(json.dumps(request.body))
    metadata = sent["metadata"]
    metadata["name"] = f"{metadata['name'][:55]}-{spec[:8]}"
    metadata["description"] = f"{metadata.get('description', '')} {HASH_MARK}{spec}".strip()
    env = sent["algorithm"].get("environments", {})
    for name, value in secrets.items():
        if env.get(name) == MASK:
            env[name] = value
    return sent


def spec_of(description: Optional[str]) -> Optional[str]:
    """The spec hash a submitted job's description holds (``submitted_body``), or None."""
    return description.rsplit(HASH_MARK, 1)[1] if description and HASH_MARK in description else None


# -- modelarts-lite: the ranktable-routing guide's Volcano Job ------------------------------------
RING_LABEL = "ring-controller.cce"
NPU_SELECTOR = {"accelerator/huawei-npu": ASCEND}
CABINET = {"cabinet": "cabinet"}
# The Ascend host paths every NPU pod mounts (the ranktable-routing guide's manifest).
ASCEND_MOUNTS = [
    ("ascend-driver", "/usr/local/Ascend/driver", "/usr/local/Ascend/driver"),
    ("ascend-add-ons", "/usr/local/Ascend/add-ons", "/usr/local/Ascend/add-ons"),
    ("localtime", "/etc/localtime", "/etc/localtime"),
    ("hccn", "/etc/hccn.conf", "/etc/hccn.conf"),
    ("npu-smi", "/usr/local/sbin/npu-smi", "/usr/local/sbin/npu-smi"),
]


def launch_line(job: JobSpec, options: "LiteOptions", mopts: Optional["ManifestOptions"] = None) -> str:
    """The code unpacked (the code ConfigMap's archive, or the stored one's URL), then ``exec`` of
    ``cloudtrain launch --platform modelarts-lite``."""
    from cloudtrain_kubernetes import manifests as m
    argv = [options.python, "-m", "cloudtrain.launch", "--platform", LITE, *job.launch_args(), "--", *job.argv]
    # the launcher goes in front of the image's PYTHONPATH (CANN images need theirs), see node_shell
    unpack = m.unpack_step(mopts) if mopts else None
    unpack = unpack + " || exit 1; " if unpack else ""
    return f"export {launcher_path(m.LAUNCHER_DIR)}; {unpack}exec " + " ".join(shlex.quote(a) for a in argv)


def start_line(job: JobSpec, options: "LiteOptions", mopts: Optional["ManifestOptions"] = None) -> str:
    """The ranktable-routing guide's container command, with ``cloudtrain launch`` in place of ``xxxx_train.sh``."""
    if options.routed():
        # the guide's lines, quoted (shellcheck: SC2086, and SC2155's masked exit status)
        return ('wget "${OPEN_SCRIPT_ADDRESS}/bootstrap.sh" -q && bash bootstrap.sh; '
                "export RANK_AFTER_ACC=${VC_TASK_INDEX}; "
                "rank_acc=$(cat /tmp/RANK_AFTER_ACC 2>/dev/null); "
                f'[ -n "${{rank_acc}}" ] && export RANK_AFTER_ACC=${{rank_acc}} {ROUTED}=1; '
                "MA_MASTER_INDEX=$(cat /tmp/MASTER_INDEX 2>/dev/null || echo 0); export MA_MASTER_INDEX; "
                + launch_line(job, options, mopts))
    return "export RANK_AFTER_ACC=${VC_TASK_INDEX} MA_MASTER_INDEX=0; " + launch_line(job, options, mopts)


def lite_env(job: JobSpec, options: "LiteOptions", detectors: str) -> List[dict]:
    """The variables the ranktable-routing guide gives every pod (downward API for the pod's own
    names); ``detectors``: ``CLOUDTRAIN_DETECTORS`` (``Provider.detectors_variable``)."""
    def field(path):
        return {"valueFrom": {"fieldRef": {"fieldPath": path}}}
    env: List[dict] = []
    if options.routed():
        env.append({"name": "OPEN_SCRIPT_ADDRESS", "value": options.script_address()})
    env += [
        {"name": "NAME", **field("metadata.name")},
        {"name": "MA_CURRENT_HOST_IP", **field("status.hostIP")},
        {"name": "MA_NUM_GPUS", "value": str(job.resources.gpus_per_node)},
        {"name": "MA_NUM_HOSTS", "value": str(job.distribution.nodes)},
        {"name": "MA_VJ_NAME", **field("metadata.annotations['volcano.sh/job-name']")},
        {"name": "MA_TASK_NAME", **field("metadata.annotations['volcano.sh/task-spec']")},
        {"name": "CLOUDTRAIN_DETECTORS", "value": detectors},
    ]
    if options.accelerator == "ascend":
        env.append({"name": "HCCL_CONNECT_TIMEOUT", "value": str(options.hccl_connect_timeout)})
    return env


def build_lite(job: JobSpec, options: "LiteOptions", mopts: "ManifestOptions", detectors: str) -> List[dict]:
    """``[Secret?, ConfigMap, Job]``: ``build_volcano``'s objects reshaped into the ranktable-routing
    guide's Job."""
    from cloudtrain_kubernetes import manifests as m
    objects = copy.deepcopy(m.build_volcano(job, mopts, kubelet=False))  # escaped once, by the stamp below
    vcjob = next(o for o in objects if o["kind"] == "Job")
    name = vcjob["metadata"]["name"]
    spec = vcjob["spec"]
    ascend = options.accelerator == "ascend"

    # One task, every node: routing renumbers the pods of a task.
    task = spec["tasks"][0]
    task.update(name=TASK, replicas=job.distribution.nodes)
    task.pop("policies", None)
    spec["tasks"] = [task]
    template = task["template"]
    template["metadata"]["labels"][m.LABEL_ROLE] = TASK
    if ascend:
        template["metadata"]["labels"][RING_LABEL] = ASCEND
    pod = template["spec"]
    pod.setdefault("affinity", {})["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [{"key": "volcano.sh/job-name", "operator": "In", "values": [name]}]},
        "topologyKey": "kubernetes.io/hostname"}]}
    mounts = [(v.name, v.mount_path, v.read_only) for v in options.volumes]
    pod["volumes"] += [v.volume() for v in options.volumes]
    if ascend:
        pod["volumes"] += [{"name": n, "hostPath": {"path": host}} for n, host, _ in ASCEND_MOUNTS]
        mounts += [(n, path, False) for n, _, path in ASCEND_MOUNTS]

    container = pod["containers"][0]
    container["command"] = ["/bin/bash", "-c", start_line(job, options, mopts)]
    container["volumeMounts"] += [{"name": n, "mountPath": p, **({"readOnly": True} if ro else {})}
                                  for n, p, ro in mounts]
    env = [e for e in container["env"] if e["name"] not in ("CLOUDTRAIN_VOLCANO_TASKS", "CLOUDTRAIN_VOLCANO_TASK")]
    env += [{"name": "CLOUDTRAIN_VOLCANO_TASKS", "value": TASK}, {"name": "CLOUDTRAIN_VOLCANO_TASK", "value": TASK}]
    mine = [e for e in lite_env(job, options, detectors) if e["name"] not in job.env and e["name"] not in job.secrets]
    taken = {e["name"] for e in mine}
    container["env"] = mine + [e for e in env if e["name"] not in taken]

    labels = vcjob["metadata"].setdefault("labels", {})
    if ascend:
        labels[RING_LABEL] = ASCEND
    if options.fault_scheduling:
        labels["fault-scheduling"] = options.fault_scheduling
    restart = job.max_restarts > 0
    spec["policies"] = [{"event": "PodEvicted", "action": "RestartJob"},
                        {"event": "PodFailed", "action": "RestartJob" if restart else "AbortJob"}]
    spec["maxRetry"] = max(job.max_restarts, 1)  # an eviction (fault scheduling) restarts the job once
    m.stamp(vcjob, job, mopts)
    return objects
