"""``modelarts``: ModelArts Standard training jobs (``create_training_job``, REST v2).

Rendering gives ``obs/PutObject`` (the code upload) and ``modelarts/CreateTrainingJob``: the
body of ``CreateTrainingJobRequest`` (a ``Job``) exactly as the SDK's request model takes it;
``schedule`` builds that model from the body (strictly: an unknown field is an error), uploads
the code (``ship_code``) and sends the request with ``ModelArtsClient``.

Code: ModelArts downloads a *directory* of OBS (``algorithm.code_dir``) into ``$MA_JOB_DIR`` and
unpacks nothing.  ``ship_code`` puts the job's archive (``cloudtrain.shipping.archive``: the code
and the launcher bundle) alone in a content-addressed directory under
``providers.modelarts.code_store`` (``<store>/cloudtrain-code/<sha256>/code/code.tar.gz``, once:
``objectstore.upload_once``); every node's command unpacks it, then runs ``cloudtrain launch``.
``code_dir`` instead names code someone staged by hand (``cloudtrain stage``).

Neutral storage: ``storage.inputs`` / ``storage.output`` (``obs://``) become ``algorithm.inputs``
/ ``algorithm.outputs`` (``access_method: env``, a fixed ``local_dir``), and the nodes get
``CLOUDTRAIN_INPUT_<NAME>`` / ``CLOUDTRAIN_OUTPUT_DIR`` pointing there; ``outputs`` downloads the
output's OBS directory.

Job ids are ``<region>/<training job id>`` so that a handle alone finds the job; logs of one
task: ``modelarts://<region>/<id>/<task>`` (e.g. ``worker-1``).
"""
from __future__ import annotations

import os
import posixpath
import re
import warnings
import shlex
from pathlib import Path
from typing import Any, Dict, Iterator, List, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cloudtrain import shipping, storage
from cloudtrain.errors import BadInput, CloudtrainWarning, JobFileError, PlatformError
from cloudtrain.accelerators import is_npu
from cloudtrain.instances import _minimums, check_minimums, choose, smallest_cpu, wanted
from cloudtrain.job import JobSpec
from cloudtrain.launch import sshd
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.launch.unpack import bootstrap_argv
from cloudtrain.cloud import CloudProvider
from cloudtrain.objectstore import CODE_FOLDER, ObjectUrl
from cloudtrain.provider import Artifact, JobStatus, Rendered, State
from cloudtrain.survival import checkpoint_uri, field_error
from cloudtrain.secrets import MASK, Masker

from . import catalog, sdk
from .detect import MA_JOB_DIR

KIND = "modelarts/CreateTrainingJob"
SERVICE = "ModelArts"
HASH_MARK = "cloudtrain:spec-hash="
MAX_ENV = 100
TERMINAL_PHASES = ("Completed", "Failed", "Terminated", "Abnormal")
CHECKPOINT_DIR = "/cache/cloudtrain-checkpoint"  # where storage.checkpoint's OBS path is mounted
UPLOAD_KIND = "obs/PutObject"
CODE_SHA = "<code-sha256>"      # the archive's sha256, filled in at submit
CODE_NAME = "code"              # the last part of the shipped code_dir: $MA_JOB_DIR/code
ARCHIVE = "code.tar.gz"
STORE_PLACEHOLDER = "<providers.modelarts.code_store>"
# where storage.inputs / storage.output appear in the container (the SDK's Input.local_dir example:
# "/home/ma-user/modelarts/inputs/data_url_0")
INPUTS_DIR = "/home/ma-user/modelarts/inputs"
OUTPUT_DIR = "/home/ma-user/modelarts/outputs/cloudtrain_output"
OUTPUT_CHANNEL = "cloudtrain_output"


class ObsData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., pattern=r"^[A-Za-z0-9_-]{1,64}$", description="the input's or output's name (also its env var / parameter)")
    obs_url: str = Field(..., description="OBS directory, e.g. obs://bucket/data/ (or /bucket/data/)")
    local_dir: Optional[str] = Field(None, description="where it appears in the container (default: ModelArts chooses)")
    access_method: Literal["parameter", "env"] = Field(
        "parameter", description="how the script learns the local path: a --<name> argument or an environment variable")


class ModelartsOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    region: Optional[str] = Field(None, description="Huawei Cloud region, e.g. cn-north-4 (default: $HUAWEICLOUD_SDK_REGION)")
    project_id: Optional[str] = Field(None, description="the region's project id (default: $HUAWEICLOUD_SDK_PROJECT_ID, else asked from IAM)")
    workspace_id: Optional[str] = Field(None, description="ModelArts workspace (default: the default workspace, \"0\")")
    code_store: Optional[str] = Field(
        None, description="obs://bucket/prefix: submit uploads the code with the launcher there (content-addressed: "
                          "<prefix>/cloudtrain-code/<sha256>/code/code.tar.gz, once); this or code_dir is required to submit")
    code_dir: Optional[str] = Field(
        None, description="instead of code_store: an OBS directory holding code staged by hand (the code with the launcher "
                          "bundle in .cloudtrain/, as cloudtrain stage writes it)")
    image: Optional[str] = Field(None, description="custom image from SWR (default: the job's image)")
    flavor_id: Optional[str] = Field(None, description="resource flavor (default on a dedicated pool: modelarts.pool.visual.<n>xlarge from "
                                                        "gpus_per_node; else the public flavor resolved from resources.accelerator x "
                                                        "gpus_per_node; checked against the catalog when it lists it)")
    pool_id: Optional[str] = Field(None, description="dedicated resource pool id")
    inputs: List[ObsData] = Field(default_factory=list, description="OBS data the job reads")
    outputs: List[ObsData] = Field(default_factory=list, description="OBS directories the job writes (uploaded by ModelArts)")
    log_export_path: Optional[str] = Field(None, description="OBS directory for the job's logs")
    priority: Optional[int] = Field(None, ge=1, le=3, description="scheduling priority on a dedicated pool (1-3, 3 highest)")
    master_port: int = Field(29500, ge=1024, le=65000, description="torchrun's master port (ModelArts gives none)")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    image_runs_as_root: bool = Field(
        False, description="mpi/horovod on several nodes: the image runs as root, so each node can start its sshd for "
                           "node 0's mpirun (ModelArts runs custom images as ma-user, uid 1000, unless the image and "
                           "pool allow root); without it such a job is refused")
    secrets_in_environment: bool = Field(
        False, description="send the job's secrets as plain training-job environment variables (visible to anyone "
                           "who can read the job); without it a job with secrets is refused")
    description: Optional[str] = Field(None, max_length=180, description="free text shown with the job (the spec hash is appended)")

    @field_validator("code_dir", "log_export_path")
    @classmethod
    def _obs_path(cls, v):
        if v is not None and not (v.startswith("obs://") or v.startswith("/")):
            raise ValueError(f"{v!r} is not an OBS path; use obs://bucket/dir/ or /bucket/dir/")
        return v

    @field_validator("code_store")
    @classmethod
    def _obs_url(cls, v):
        if v is not None and (not v.startswith("obs://") or not v[len("obs://"):].split("/")[0]):
            raise ValueError(f"{v!r} is not an obs://BUCKET/PREFIX URL; use e.g. obs://my-bucket/cloudtrain/")
        return v


# Huawei: ModelArts runs a custom image as ma-user (uid 1000; "the default user of a custom image
# must be the user whose UID is 1101" in older releases), and public pools do not start it as
# root; the launcher's --sshd (cloudtrain.launch.sshd) starts the image's sshd only as root.
SSH_AS_MA_USER = ("is mpi/horovod on several nodes: node 0's mpirun reaches the others over ssh, but ModelArts Standard "
                  "runs a custom image as ma-user (uid 1000) and cloudtrain starts a node's sshd only as root, so no "
                  "node would listen and node 0 would wait in vain; use ddp or deepspeed (torchrun, no ssh), or set "
                  "providers.modelarts.image_runs_as_root: true if your image and pool run as root")
RDMA_ON = ("is on, but ModelArts Standard's training-job API has no RDMA field (spec.resource takes flavor_id, node_count "
           "and pool_id only): RoCE or InfiniBand comes with the flavor or the dedicated pool's nodes, and the job uses "
           "it when they have it; set network.rdma: auto (with providers.modelarts.pool_id for a pool of RDMA nodes)")
SPOT_MEANING = ("spot on ModelArts is schedule_policy.preemptible: the job may be preempted by higher-priority jobs in "
                "your own dedicated pool; it is not discounted capacity (ModelArts Standard has no spot pricing for "
                "training jobs)")
# the card a flavor id names, e.g. modelarts.vm.gpu.8v100, modelarts.bm.npu.arm.8snt9b3.d
FLAVOR_CARDS = (("v100", "V100"), ("a100", "A100"), ("h100", "H100"), ("t4", "T4"), ("snt9b", "Ascend-910B"),
                ("910b", "Ascend-910B"))


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


def _obs(url: str) -> str:
    """``obs://bucket/dir`` -> ``/bucket/dir/`` (the form ModelArts' v2 API takes)."""
    path = url[len("obs://"):] if url.startswith("obs://") else url.lstrip("/")
    return "/" + path.rstrip("/") + "/"


def _obs_object(uri: str) -> str:
    """``obs://bucket/key`` -> ``/bucket/key`` (a trailing ``/``, a directory, kept as given)."""
    return "/" + uri[len("obs://"):].lstrip("/")


def code_object(code_store: Optional[str], sha: str = CODE_SHA) -> ObjectUrl:
    """Where the archive of sha256 ``sha`` goes: alone in a directory, ModelArts' ``code_dir``."""
    prefix = ObjectUrl.parse(code_store, "providers.modelarts.code_store") if code_store \
        else ObjectUrl("obs", STORE_PLACEHOLDER)
    return prefix.child(CODE_FOLDER, sha, CODE_NAME, ARCHIVE)


def _line(job: JobSpec, *loc) -> Tuple[Optional[str], Optional[int]]:
    located = JobFileError.at(job, loc, "")
    return located.file, located.line


class ModelartsProvider(CloudProvider):
    name = "modelarts"
    extra = "modelarts"
    description = "ModelArts Standard training jobs (custom image, OBS code)"
    sdk_modules = ("huaweicloudsdkmodelarts",)
    Options = ModelartsOptions
    catalog_refresh = "cloudtrain_modelarts.catalog:refresh"
    # ModelArts' `status.phase` (the secondary phase is shown in the message).
    states = {
        "Creating": State.PENDING,
        "Pending": State.PENDING,
        "Running": State.RUNNING,
        "Terminating": State.RUNNING,
        "Completed": State.SUCCEEDED,
        "Failed": State.FAILED,
        "Abnormal": State.FAILED,
        "Terminated": State.CANCELLED,
    }
    platform = "modelarts"

    status_poll = 5.0
    stopping = ("Terminating",)

    def __init__(self, client=None, poll: Optional[float] = None):
        """``client``: a ``ModelArtsClient`` to use for every region (tests); default: one per
        region, built from the environment's credentials.  ``poll``: seconds between reads while
        following a job (ModelArts' API is rate-limited)."""
        super().__init__(poll=poll)
        self._client = client
        self._clients: Dict[str, Any] = {}
        self.project_id: Optional[str] = None  # schedule's option; else the environment's

    # -- what submit needs before it sends anything --------------------------------------------
    storage_schemes = ("obs",)  # storage.inputs -> algorithm.inputs, storage.output -> algorithm.outputs
    required = {"code_store": "obs://my-bucket/cloudtrain/", "flavor_id": "modelarts.vm.gpu.8v100",
                "region": "cn-north-4"}
    required_help = {
        "code_store": "ModelArts runs code from OBS: submit uploads the code (with the launcher) to this OBS "
                      "bucket and prefix (or set code_dir to code you staged there yourself)",
        "flavor_id": "a resource flavor (the console lists them; cloudtrain's catalog has none for this job's "
                     "resources), or pool_id for a dedicated pool",
        "region": f"the region of the job and of its OBS buckets ({sdk.REGION_ENV} in the environment gives it too)",
    }

    def fallback(self, option: str, job: JobSpec, options: ModelartsOptions) -> bool:
        if option == "code_store":
            return bool(options.code_dir)
        if option == "flavor_id":
            return bool(self.flavor(job, options) or options.pool_id)
        return option == "region" and bool(os.environ.get(sdk.REGION_ENV))

    def preflight(self, job: JobSpec, options: ModelartsOptions, problems) -> None:
        super().preflight(job, options, problems)
        if job.secrets and not options.secrets_in_environment:
            problems.add(self.job_error(job, ("secrets",), f"ModelArts training jobs have no secret store: "
                                        f"{', '.join(sorted(job.secrets))} would be readable by anyone who can view "
                                        "the job. Set providers.modelarts.secrets_in_environment: true to send them "
                                        "anyway, or read them in the script from a secret service"))

    # -- render (pure) ------------------------------------------------------------------------
    def check(self, job: JobSpec, options: ModelartsOptions) -> None:
        if not (options.image or job.image):
            file, line = _line(job, "image")
            raise JobFileError("ModelArts Standard runs a custom image: set `image` (an SWR image) or "
                               "providers.modelarts.image", file=file, line=line, field="image")
        env = self.environments(job, options)
        if len(env) > MAX_ENV:
            file, line = _line(job, "env")
            raise JobFileError(f"ModelArts takes at most {MAX_ENV} environment variables, this job has {len(env)} "
                               "(with cloudtrain's own); drop some", file=file, line=line, field="env")
        if self.over_ssh(job) and not options.image_runs_as_root:
            raise self.job_error(job, ("distribution", "type"), SSH_AS_MA_USER)
        self.check_network(job, options)
        if self.over_ssh(job):
            warnings.warn("mpi/horovod on ModelArts Standard: node 0's mpirun reaches the other nodes over ssh, which "
                          "a custom image must allow (Huawei: without passwordless ssh between the nodes, training "
                          "fails); cloudtrain starts the image's sshd on every node (root, /usr/sbin/sshd) and waits for "
                          "it, but the image must hold a key pair shared by its nodes (~/.ssh/id_* with the public key in "
                          "authorized_keys)", CloudtrainWarning)
        r = job.resources
        if options.pool_id and (r.cpus_per_node or r.memory_gb):
            # spec.resource on a pool takes a flavor_id (cards per node); the SDK's
            # main_container_customized_flavor (cpu_core_num, mem_size) documents no units, so it is not sent
            warnings.warn(f"resources.cpus_per_node/memory_gb are not sent on dedicated pool {options.pool_id}: the pool's "
                          "flavor (modelarts.pool.visual.<n>xlarge) sizes each node", CloudtrainWarning)
        self.check_survival(job, options)
        if job.spot:  # after check_survival, which refuses spot without a pool: no warning before that error
            warnings.warn(SPOT_MEANING, CloudtrainWarning)
        self.check_code(job, options)
        self.check_storage(job, options)
        reserved = sorted(k for k in [*job.env, *job.secrets] if k.startswith("MA_"))
        if reserved:
            warnings.warn(f"{', '.join(reserved)}: ModelArts reserves MA_* variables; rename them", CloudtrainWarning)
        self.body(job, options)  # whatever else render would refuse (the flavor), validate refuses too

    @staticmethod
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

    def check_network(self, job: JobSpec, options: ModelartsOptions) -> None:
        """resources.shm_gb has no field: exit 2.  network.rdma: the training-job API has no RDMA field (the SDK's Job, Spec and SpecResource:
        flavor_id, node_count, pool_id, pool_group_id), so ``on`` cannot be requested: the nodes'
        RoCE/InfiniBand is the flavor's or the pool's.  ``off`` becomes NCCL_IB_DISABLE=1 (NCCL only:
        Ascend's HCCL has no such switch)."""
        if job.resources.shm_gb:  # the SDK's Job has no /dev/shm size (spec.resource: flavor_id, node_count, pool_id)
            raise self.job_error(job, ("resources", "shm_gb"), "ModelArts Standard's training-job API has no /dev/shm "
                                 "setting (the flavor sizes it), so shm_gb would be ignored; drop it for this provider "
                                 "(--set resources.shm_gb=null)")
        mode = job.network.rdma
        if mode == "on":
            raise self.job_error(job, ("network", "rdma"), RDMA_ON)
        if mode == "off" and is_npu(self.accelerator(job, options)):
            raise self.job_error(job, ("network", "rdma"), "is off, but Ascend NPUs reach each other over their own "
                                 "RoCE ports (HCCL), which a training job cannot turn off; set network.rdma: auto")

    @staticmethod
    def accelerator(job: JobSpec, options: ModelartsOptions) -> Optional[str]:
        """The job's accelerator: resources.accelerator, else the one its resources.instance_type names."""
        if job.resources.accelerator:
            return job.resources.accelerator
        found = wanted(job, catalog.RULES) if job.resources.instance_type else None
        return found[0] if found else None

    def check_code(self, job: JobSpec, options: ModelartsOptions) -> None:
        if options.code_dir and options.code_store:
            raise self.job_error(job, ("providers", self.name, "code_dir"), "and code_store are both set: code_dir names "
                                 "code staged by hand, code_store where submit uploads it; keep one")

    def check_storage(self, job: JobSpec, options: ModelartsOptions) -> None:
        """storage.inputs become channels named after the input, storage.output the channel
        ``cloudtrain_output``: providers.modelarts.inputs/outputs must not name them too."""
        named = {item.name for item in options.inputs}
        for name in sorted(job.storage.inputs):
            if name in named:
                raise self.job_error(job, ("storage", "inputs", name), f"becomes the ModelArts input {name!r}, which "
                                     "providers.modelarts.inputs names too; rename one of them")
        if job.storage.output and OUTPUT_CHANNEL in {item.name for item in options.outputs}:
            raise self.job_error(job, ("storage", "output"), f"becomes the ModelArts output {OUTPUT_CHANNEL!r}, which "
                                 "providers.modelarts.outputs names too; rename that one")

    def code_dir_name(self, job: JobSpec, options: ModelartsOptions) -> str:
        if options.code_dir:
            return posixpath.basename(_obs(options.code_dir).rstrip("/"))
        return CODE_NAME

    def workdir(self, job: JobSpec, options: ModelartsOptions) -> str:
        """Where the code lands: ModelArts downloads ``code_dir`` into ``$MA_JOB_DIR``."""
        return f"{MA_JOB_DIR}/{self.code_dir_name(job, options)}"

    @staticmethod
    def over_ssh(job: JobSpec) -> bool:
        """Does node 0's mpirun/horovodrun reach other nodes (over ssh: ModelArts has no MPI operator)?"""
        return job.distribution.type in ("mpi", "horovod") and job.distribution.nodes > 1

    def environments(self, job: JobSpec, options: ModelartsOptions) -> Dict[str, str]:
        env = {
            "CLOUDTRAIN_DETECTORS": self.detectors_variable(),
            "CLOUDTRAIN_MASTER_PORT": str(options.master_port),
            "CLOUDTRAIN_JOB_ID": job.name,
            "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
        }
        if self.over_ssh(job):  # every node starts its sshd (launch --sshd); node 0 waits for them all
            env.update({"OMPI_MCA_plm_rsh_args": sshd.CLIENT_OPTIONS, SSH_WAIT: str(sshd.SSHD_PORT)})
        if job.network.rdma == "off":  # NCCL over TCP sockets only (check_network: not on Ascend)
            env["NCCL_IB_DISABLE"] = "1"
        if job.storage.checkpoint:
            env["CLOUDTRAIN_CHECKPOINT_DIR"] = CHECKPOINT_DIR
        for name in job.storage.inputs:  # ModelArts downloads input <name> here before the command
            env[storage.input_env(name)] = f"{INPUTS_DIR}/{name}"
        if job.storage.output:           # and uploads this directory to storage.output
            env[storage.OUTPUT_ENV] = OUTPUT_DIR
        env.update(self.rendered_env(job))
        return env

    def flavor(self, job: JobSpec, options: ModelartsOptions) -> Optional[str]:
        """A dedicated pool's ``modelarts.pool.visual.<n>xlarge`` (or ``flavor_id``), else the
        public flavor: ``flavor_id`` checked against the catalog, or resolved from ``resources``
        (another platform's instance type is translated, never sent raw)."""
        if options.pool_id:
            return catalog.pool_flavor(job, options.flavor_id, options.pool_id)
        choice = choose(job, catalog.RULES, options.flavor_id)
        if options.flavor_id:
            loc = ("providers", self.name, "flavor_id")
            check_minimums(job, catalog.RULES, choice, loc)
            if choice is not None and choice.row is None:
                self.check_flavor_card(job, options, choice.instance_type, loc)
        choice = choice or smallest_cpu(job, catalog.RULES)
        return choice.instance_type if choice else None

    def check_flavor_card(self, job: JobSpec, options: ModelartsOptions, flavor: str, loc: tuple) -> None:
        """A flavor the catalog lacks, whose id names a card (``modelarts.vm.gpu.8v100``) other than
        the job's accelerator: exit 2 naming both, never a silent override."""
        named = flavor_card(flavor)
        asked = self.accelerator(job, options)
        field = "resources.accelerator" if job.resources.accelerator else "resources.instance_type"
        if named and asked and chip(asked) != named:
            raise self.job_error(job, loc, f"{flavor} names a {named} flavor, but the job asks for {asked} "
                                           f"({field}); make them agree, or drop flavor_id and let resources choose")
        cards, r = flavor_count(flavor), job.resources
        if cards and r.gpus_per_node and cards != r.gpus_per_node:
            raise self.job_error(job, loc, f"{flavor} names {cards} cards per node, but resources.gpus_per_node is "
                                           f"{r.gpus_per_node}; make them agree, or drop flavor_id and let resources choose")
        if r.cpus_per_node or r.memory_gb:  # a flavor newer than the catalog: its size is the platform's to know
            warnings.warn(f"{'.'.join(loc)}: {flavor} is not in cloudtrain's ModelArts catalog, so its vCPUs and memory "
                          f"are unknown offline: resources.cpus_per_node/memory_gb ({_minimums(r)}) are not checked "
                          "against it (cloudtrain catalog refresh -p modelarts)", CloudtrainWarning, stacklevel=3)

    @classmethod
    def instance_rules(cls):
        return catalog.RULES

    def body(self, job: JobSpec, options: ModelartsOptions) -> dict:
        metadata: Dict[str, Any] = {"name": job.name,
                                    "description": options.description or f"cloudtrain job {job.name}"}
        if options.workspace_id:
            metadata["workspace_id"] = options.workspace_id
        if job.max_restarts > 0:
            # Restart the whole job after any failure (not only the platform's hardware faults).
            metadata["annotations"] = {"fault-tolerance/job-retry-num": str(job.max_restarts),
                                       "fault-tolerance/job-unconditional-retry": "true"}
        workdir = self.workdir(job, options)
        # the shipped archive, alone in code_dir: its sha256 checked (CODE_SHA, filled in at submit),
        # then unpacked by cloudtrain's own unpacker (unpack.BOOTSTRAP: no cloudtrain in the image)
        unpack = "" if options.code_dir else \
            shlex.join(bootstrap_argv(options.python, CODE_SHA, ARCHIVE, ".")) + " && "
        algorithm: Dict[str, Any] = {
            "command": f"cd {shlex.quote(workdir)} && {unpack}" + shipping.node_command(job, platform=self.name, python=options.python,
                                                                           sshd=self.over_ssh(job)),
            "engine": {"image_url": options.image or job.image},
            "environments": self.environments(job, options),
            "working_dir": workdir,
            "code_dir": _obs(options.code_dir) if options.code_dir else
            _obs_object(str(code_object(options.code_store))).rsplit("/", 1)[0] + "/",
        }
        channels = {"inputs": [self._data(item, "inputs") for item in options.inputs],
                    "outputs": [self._data(item, "outputs") for item in options.outputs]}
        for name, uri in sorted(job.storage.inputs.items()):
            channels["inputs"].append({"name": name, "access_method": "env", "local_dir": f"{INPUTS_DIR}/{name}",
                                       "remote": {"obs": {"obs_url": _obs_object(uri)}}})
        if job.storage.output:
            channels["outputs"].append({"name": OUTPUT_CHANNEL, "access_method": "env", "local_dir": OUTPUT_DIR,
                                        "remote": {"obs": {"obs_url": _obs(job.storage.output)}}})
        algorithm.update({key: items for key, items in channels.items() if items})
        resource: Dict[str, Any] = {"node_count": job.distribution.nodes}
        flavor = self.flavor(job, options)
        if flavor:
            resource["flavor_id"] = flavor
        if options.pool_id:
            resource["pool_id"] = options.pool_id
        spec: Dict[str, Any] = {"resource": resource}
        if options.log_export_path:
            spec["log_export_path"] = {"obs_url": _obs(options.log_export_path)}
        if options.priority is not None or job.spot:
            spec["schedule_policy"] = {k: v for k, v in (("priority", options.priority), ("preemptible", job.spot or None))
                                       if v is not None}
        if job.max_runtime is not None:
            spec["auto_stop"] = {"time_unit": "HOURS", "duration": job.max_runtime // 3600}
        if job.storage.checkpoint:  # the same OBS path for every attempt: what one saved, the next sees
            spec["volumes"] = [{"obs": {"obs_path": _obs(job.storage.checkpoint).rstrip("/"), "local_path": CHECKPOINT_DIR}}]
        return {"kind": "job", "metadata": metadata, "algorithm": algorithm, "spec": spec}

    @staticmethod
    def _data(item: ObsData, key: str) -> dict:
        out: Dict[str, Any] = {"name": item.name, "access_method": item.access_method}
        if item.local_dir:
            out["local_dir"] = item.local_dir
        out["remote"] = {"obs": {"obs_url": _obs(item.obs_url)}}
        return out

    def artifacts(self, job: JobSpec, options: ModelartsOptions) -> List[Artifact]:
        out = [Artifact(KIND, job.name, self.body(job, options))]
        if not options.code_dir:
            url = code_object(options.code_store)
            out.insert(0, Artifact(UPLOAD_KIND, "code", {"Bucket": url.bucket, "Key": url.key,
                                                         "ContentType": "application/gzip"}))
        return out

    # -- code ------------------------------------------------------------------------------------
    def code_archive(self, job: JobSpec) -> Tuple[bytes, str]:
        """The archive (code and launcher bundle) and its sha256 (``shipping.packed``)."""
        return shipping.packed(job, [self.detector_target()])

    def store(self, options: ModelartsOptions):
        """The OBS store of the job's region (``obsstore.ObsStore``)."""
        from .obsstore import ObsStore
        return ObsStore(region=sdk.region_of(options.region))

    def ship_code(self, rendered: Rendered) -> List[str]:
        """Upload the archive to ``code_store`` unless it is there (``objectstore.upload_once``)."""
        from cloudtrain.objectstore import upload_once
        job, options = rendered.job, rendered.options
        if options.code_dir:
            raise BadInput(f"providers.modelarts.code_dir names code staged by hand ({options.code_dir}): there is "
                           "nothing to upload; set code_store instead of code_dir to have cloudtrain upload it")
        if not options.code_store:
            raise self.not_set(job, "code_store", self.required["code_store"])
        if not job.code_path.is_dir():
            raise self.job_error(job, ("code",), f"the code directory {job.code_path} does not exist; fix `code`")
        data, sha = self.code_archive(job)
        url = code_object(options.code_store, sha)
        upload_once(self.store(options), url, data)
        return [str(url)]

    # -- clients ---------------------------------------------------------------------------------
    def models(self):
        return sdk.require("huaweicloudsdkmodelarts.v1", self.name)

    def client(self, region: str):
        if self._client is not None:
            return self._client
        if region not in self._clients:
            v1 = self.models()
            from huaweicloudsdkmodelarts.v1.region.modelarts_region import ModelArtsRegion
            creds = sdk.credentials(self.name, self.project_id)
            self._clients[region] = sdk.build_client(v1.ModelArtsClient, ModelArtsRegion, region, creds)
        return self._clients[region]

    @staticmethod
    def split_id(job_id: str) -> Tuple[str, str, Optional[str]]:
        """``region/id[/task]`` -> (region, id, task)."""
        parts = job_id.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise BadInput(f"{job_id!r} is not a ModelArts job id; expected <region>/<training job id>[/<task>], "
                           "e.g. modelarts://cn-north-4/3b5c...")
        return parts[0], parts[1], (parts[2] if len(parts) == 3 else None)

    # -- lifecycle ---------------------------------------------------------------------------------
    def request_body(self, rendered: Rendered, secrets: Dict[str, str], digest: str) -> dict:
        """The rendered body with its spec-hash name and, if allowed, the secrets' values."""
        job = rendered.job
        # preflight checked code_dir, the flavor and the secrets
        artifact = next(a for a in rendered.artifacts if a.kind == KIND)
        body = _copy(artifact.content)
        if not rendered.options.code_dir:  # the shipped archive's directory
            _, sha = self.code_archive(job)
            body["algorithm"]["code_dir"] = body["algorithm"]["code_dir"].replace(CODE_SHA, sha)
            body["algorithm"]["command"] = body["algorithm"]["command"].replace(CODE_SHA, sha)
        body["metadata"]["name"] = f"{body['metadata']['name'][:55]}-{digest[:8]}"
        body["metadata"]["description"] = f"{body['metadata'].get('description', '')} {HASH_MARK}{digest}".strip()
        env = body["algorithm"].get("environments", {})
        for name in job.secrets:
            if env.get(name) == MASK:
                env[name] = secrets[name]
        return body

    def schedule(self, rendered: Rendered, secrets: Dict[str, str]) -> str:
        self.project_id = rendered.options.project_id
        self._request(self.request_body(rendered, secrets, self.spec_hash(rendered)))  # refused before any call
        if not rendered.options.code_dir:
            self.ship_code(rendered)
        return super().schedule(rendered, secrets)

    def _request(self, body: dict):
        v1 = self.models()
        try:
            return v1.CreateTrainingJobRequest(body=sdk.to_model(v1, "Job", body))
        except ValueError as exc:
            raise BadInput(f"the rendered request does not fit the ModelArts SDK's Job model: {exc}") from None

    def _create(self, rendered: Rendered, secrets: Dict[str, str], spec: str) -> str:
        region = sdk.region_of(rendered.options.region)
        request = self._request(self.request_body(rendered, secrets, spec))
        masker = Masker(secrets.values())
        try:
            with sdk.api_errors(SERVICE, "create_training_job"):
                response = self.client(region).create_training_job(request)
        except PlatformError as exc:
            exc.args = (masker(str(exc)),)  # the service may quote a value back; keeps the request id
            raise
        return f"{region}/{response.metadata.id}"

    def _find_by_spec(self, rendered: Rendered, spec: str) -> Optional[str]:
        """The job with this spec-hash name (an earlier submit of the same request)."""
        options: ModelartsOptions = rendered.options
        region = sdk.region_of(options.region)
        body = self.request_body(rendered, {name: MASK for name in rendered.job.secrets}, spec)
        name, description = body["metadata"]["name"], body["metadata"]["description"]
        v1 = self.models()
        search = v1.JobSearches(offset=0, limit=50, filters=[v1.Filter(key="name", operator="like", value=[name])])
        if options.workspace_id:
            search.workspace_id = options.workspace_id
        with sdk.api_errors(SERVICE, "list_training_jobs"):
            response = self.client(region).list_training_jobs(v1.ListTrainingJobsRequest(body=search))
        for item in response.items or []:
            meta = item.metadata
            if meta and meta.name == name and HASH_MARK in (meta.description or "") \
                    and (meta.description or "").rsplit(HASH_MARK, 1)[1] == description.rsplit(HASH_MARK, 1)[1]:
                return f"{region}/{meta.id}"
        return None

    def _describe(self, job_id: str):
        region, training_id, _ = self.split_id(job_id)
        v1 = self.models()
        with sdk.api_errors(SERVICE, f"show_training_job_details of {training_id}"):
            return self.client(region).show_training_job_details(
                v1.ShowTrainingJobDetailsRequest(training_job_id=training_id))

    def _to_status(self, handle_id: str, job) -> JobStatus:
        st = job.status
        phase = st.phase if st else None
        secondary = st.secondary_phase if st else None
        raw = phase if not secondary or secondary == phase else f"{phase}/{secondary}"
        message = ""
        exit_code = None
        for ts in (st.task_statuses or []) if st else []:
            if ts.exit_code not in (None, 0):
                exit_code = ts.exit_code
                message = f"{ts.task} exited with {ts.exit_code}" + (f": {ts.message}" if ts.message else "")
                break
        if not message and secondary and secondary != phase:
            message = secondary
        meta = job.metadata
        created = meta.create_time / 1000.0 if meta and meta.create_time else None
        started = st.start_time / 1000.0 if st and st.start_time else None
        ended = None
        if started is not None and st.duration and phase in TERMINAL_PHASES:
            ended = started + st.duration / 1000.0
        nodes = job.spec.resource.node_count if job.spec and job.spec.resource else None
        return JobStatus(self.handle(handle_id), self.map_state(phase), raw_state=raw,
                         name=meta.name if meta else None, message=message, nodes=nodes,
                         exit_code=exit_code, created_at=created, started_at=started, ended_at=ended)

    def _stop(self, job_id: str) -> None:
        region, training_id, _ = self.split_id(job_id)
        v1 = self.models()
        with sdk.api_errors(SERVICE, f"stop_training_job of {training_id}"):
            self.client(region).stop_training_job(v1.StopTrainingJobRequest(
                training_job_id=training_id, body=v1.JobActionType(action_type="terminate")))

    def list(self) -> List[JobStatus]:
        region = sdk.region_of(self.account_option("region"))  # the config's, else the environment's
        v1 = self.models()
        search = v1.JobSearches(offset=0, limit=50, sort_by="create_time", order="desc")
        with sdk.api_errors(SERVICE, "list_training_jobs"):
            response = self.client(region).list_training_jobs(v1.ListTrainingJobsRequest(body=search))
        out = []
        for item in response.items or []:
            if item.metadata and HASH_MARK in (item.metadata.description or ""):
                out.append(self._to_status(f"{region}/{item.metadata.id}", item))
        return out

    # -- outputs ---------------------------------------------------------------------------------
    def outputs(self, job_id: str, dest) -> List[Path]:
        """Every object under the job's ``cloudtrain_output`` channel (storage.output's OBS
        directory, which ModelArts fills from CLOUDTRAIN_OUTPUT_DIR) into ``dest``."""
        from cloudtrain.objectstore import download
        from .obsstore import ObsStore
        region, training_id, _ = self.split_id(job_id)
        algorithm = self._describe(job_id).algorithm
        found = [o for o in (algorithm.outputs if algorithm else None) or [] if o.name == OUTPUT_CHANNEL]
        obs_url = found[0].remote.obs.obs_url if found and found[0].remote and found[0].remote.obs else None
        if not obs_url:
            raise BadInput(f"the ModelArts job {training_id} has no storage.output (no {OUTPUT_CHANNEL!r} output); "
                           "give the job storage.output: obs://bucket/dir/ to collect what it writes to "
                           "CLOUDTRAIN_OUTPUT_DIR")
        bucket, _, key = obs_url.lstrip("/").partition("/")
        return download(ObsStore(region=region), ObjectUrl("obs", bucket, key), Path(dest))

    # -- logs ------------------------------------------------------------------------------------
    def _preview(self, region: str, training_id: str, task: str):
        v1 = self.models()
        with sdk.api_errors(SERVICE, f"show_training_job_logs_preview of {training_id}/{task}"):
            return self.client(region).show_training_job_logs_preview(
                v1.ShowTrainingJobLogsPreviewRequest(training_job_id=training_id, task_id=task))

    def _log_chunks(self, job_id: str, job, cursor: dict, final: bool) -> Iterator[str]:
        """Each task's new log lines (``[worker-i] `` before every line when the job has several
        tasks), from its log preview, which holds the last 5 MB."""
        region, training_id, only = self.split_id(job_id)
        seen, pending = cursor.setdefault("seen", {}), cursor.setdefault("pending", {})
        tasks = [only] if only else list((job.status.tasks if job.status else None) or [])
        prefix = {t: (f"[{t}] " if len(tasks) > 1 else "") for t in tasks}
        for task in tasks:
            *complete, pending[task] = (pending.get(task, "") + self._new_text(region, training_id, task, seen)).split("\n")
            for line in complete:
                yield prefix[task] + line + "\n"
        if final:
            for task in tasks:
                if pending.get(task):
                    yield prefix[task] + pending[task] + "\n"

    def _new_text(self, region: str, training_id: str, task: str, seen: Dict[str, int]) -> str:
        """What a task logged since the last call (``seen``: bytes already shown per task)."""
        preview = self._preview(region, training_id, task)
        data = (preview.content or "").encode("utf-8")
        full = preview.full_size if preview.full_size is not None else len(data)
        new = full - seen.get(task, 0)
        if new <= 0:
            return ""
        seen[task] = full
        if new <= len(data):
            return data[len(data) - new:].decode("utf-8", errors="replace")
        return (f"[cloudtrain] ... {new - len(data)} bytes skipped (a log preview holds the last 5 MB)\n"
                + data.decode("utf-8", errors="replace"))



def _copy(obj):
    import json
    return json.loads(json.dumps(obj))
