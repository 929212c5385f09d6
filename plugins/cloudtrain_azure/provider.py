"""``azure``: Azure ML command jobs through ``azure-ai-ml`` (``MLClient``).

Render writes the command job YAML that ``azure.ai.ml.load_job`` reads (the ``azureml/job``
artifact) without importing the SDK; the tests check it against what ``azure.ai.ml.command()``
builds.
Submit stages the code with the launcher bundle, writes that YAML next to it, loads it with
``load_job`` and sends it with ``MLClient.jobs.create_or_update``, so what is sent is what the
render showed (plus the job name, the spec tag and the staged code path).

Distribution types map to Azure ML's distributions:

- ``ddp``, ``deepspeed`` (and ``none`` on several nodes): ``PyTorch`` with
  ``process_count_per_instance: 1``; every node runs ``cloudtrain launch``, which reads
  ``NODE_RANK``/``MASTER_ADDR``/``MASTER_PORT`` and starts torchrun (or deepspeed) for the node's
  processes.  The script sees torchrun's ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``, as everywhere.
- ``mpi``, ``horovod``: ``Mpi`` with ``process_count_per_instance`` = processes per node; Azure
  ML runs ``mpirun`` itself (it takes no user mpirun and exposes no hostfile), and every rank runs
  the shipped rank shim (``cloudtrain.launch.mpirank``), which sets ``RANK``/``WORLD_SIZE``/
  ``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` from Open MPI's variables, as cloudtrain's own mpirun does.
- ``ps-worker``: ``TensorFlow`` (parameter servers + workers); Azure ML sets ``TF_CONFIG``.
- ``ray``: ``PyTorch`` with one process per node, as ``ddp``: ``cloudtrain launch --type ray``
  starts Ray on every node (the head on node 0) and runs the command on the head, as on every
  other platform and as ``--emulate azure`` runs it.  Azure ML's own ``RayDistribution`` is
  experimental in the SDK and what its nodes see is not documented (the command's node, its
  variables), so no ``CLOUDTRAIN_*`` variable could be promised under it.

SDK imports are lazy: ``cloudtrain render -p local`` never imports azure.
"""
from __future__ import annotations

import contextlib
import json
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator, List, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cloudtrain import shipping, storage, yamlio
from cloudtrain.errors import (BadInput, CloudtrainWarning, JobFileError, JobNotFound, MissingCredentials,
                               PlatformError)
from cloudtrain.instances import choose
from cloudtrain.job import JobSpec
from cloudtrain.outputs import copy_tree
from cloudtrain.cloud import CloudProvider, timestamp
from cloudtrain.provider import Artifact, JobStatus, Rendered, State
from cloudtrain.survival import checkpoint_uri, with_neutral

from . import infiniband

KIND = "azureml/job"
CHECKPOINT_OUTPUT = "checkpoint"  # the job output that holds storage.checkpoint
STORAGE_OUTPUT = "cloudtrain_output"  # the job output that holds storage.output (CLOUDTRAIN_OUTPUT_DIR)
# The URIs Azure ML takes for a job's data (seed 002, the PyTorch example's note: "AzureML supports
# https://, abfss://, wasbs:// and azureml:// URIs"); azure-ai-ml's load_job passes any string on.
DATA_SCHEMES = ("azureml", "https", "wasbs", "abfss")
SPEC_TAG = "cloudtrain.spec"
WORKSPACE_OPTIONS = ("subscription_id", "resource_group", "workspace", "config_file")  # in MLClient's order
OUTPUT_DIR = "outputs"  # Azure ML uploads ./outputs of the job's working directory
USER_LOG = re.compile(r"^user_logs/std_log.*\.txt$")
JOB_SCHEMA = "https://azuremlschemas.azureedge.net/latest/commandJob.schema.json"


class DataRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: Optional[str] = Field(None, description="azureml://, https://, abfss:// or wasbs:// URI (outputs: default location if empty; "
                                                 "inputs: storage.inputs' URI of the same name if empty)")
    type: Literal["uri_folder", "uri_file"] = Field("uri_folder", description="uri_folder or uri_file")
    mode: Optional[Literal["ro_mount", "rw_mount", "download", "upload", "direct"]] = Field(
        None, description="how the node sees it (Azure ML's default: ro_mount for inputs, rw_mount for outputs)")


class AzureOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subscription_id: Optional[str] = Field(None, description="workspace subscription (with resource_group and workspace; default: config.json)")
    resource_group: Optional[str] = Field(None, description="workspace resource group")
    workspace: Optional[str] = Field(None, description="Azure ML workspace name")
    config_file: Optional[str] = Field(None, description="the workspace's config.json (default: searched from the current directory up, like MLClient.from_config)")
    compute: Optional[str] = Field(None, description="compute cluster name (default: serverless compute sized by resources.instance_type)")
    vm_size: Optional[str] = Field(None, description="the VM size: serverless compute's (default: resolved from resources.accelerator x gpus_per_node), or the compute cluster's, for the InfiniBand check at render (default: read with compute.get at submit)")
    environment: Optional[str] = Field(None, description="a registered environment, e.g. azureml:acpt-pytorch-2.2-cuda12.1@latest (default: an anonymous one from the job's image)")
    experiment_name: Optional[str] = Field(None, description="experiment to file the job under (default: the job's name)")
    inputs: Dict[str, DataRef] = Field(default_factory=dict, description="named inputs; a URI alone is short for {path: URI}; the command refers to them as ${{inputs.NAME}}")
    outputs: Dict[str, DataRef] = Field(default_factory=dict, description="named outputs; a URI alone is short for {path: URI}; the command refers to them as ${{outputs.NAME}}")
    timeout: Optional[int] = Field(None, ge=1, description="cancel the job after this many seconds (limits.timeout)")
    job_tier: Optional[Literal["spot", "basic", "standard", "premium"]] = Field(None, description="queue_settings.job_tier (spot: low priority, can be preempted)")
    priority: Optional[Literal["low", "medium", "high"]] = Field(None, description="queue_settings.priority")
    identity: Optional[Literal["user_identity", "managed", "aml_token"]] = Field(None, description="identity the job uses for data access (default: Azure ML's)")
    tags: Dict[str, str] = Field(default_factory=dict, description="extra job tags")

    @field_validator("tags", mode="before")
    @classmethod
    def _tag_scalars(cls, value):  # --set providers.azure.tags.attempt=2 gives an int
        if isinstance(value, dict):
            return {k: (str(v).lower() if isinstance(v, bool) else str(v)) if isinstance(v, (bool, int, float)) else v
                    for k, v in value.items()}
        return value

    @field_validator("inputs", "outputs", mode="before")
    @classmethod
    def _uri_alone(cls, value):
        if isinstance(value, dict):
            return {k: {"path": v} if isinstance(v, str) else v for k, v in value.items()}
        return value


def _scope_of(job_id: str) -> Tuple[Optional[Tuple[str, str, str]], str]:
    """``sub/rg/ws/name`` -> ((sub, rg, ws), name); ``name`` -> (None, name)."""
    parts = job_id.split("/")
    if len(parts) == 4 and all(parts):
        return (parts[0], parts[1], parts[2]), parts[3]
    if len(parts) == 1 and parts[0]:
        return None, parts[0]
    raise BadInput(f"{job_id!r} is not an azure job id; expected SUBSCRIPTION/RESOURCE_GROUP/WORKSPACE/JOB "
                   "(cloudtrain list -p azure shows them)")


def workspace_config(config_file: Optional[str], start: Optional[Path] = None) -> Optional[Path]:
    """The config.json MLClient.from_config would read: ``config_file`` (a file, or a directory
    to search from), else searched from the current directory up in .azureml/, aml_config/ and
    the directory itself (azure/ai/ml/_ml_client.py, ``from_config``: 20 levels)."""
    path = Path(config_file).expanduser() if config_file else (start or Path.cwd())
    if path.is_file():
        return path
    for sub in (".azureml", "aml_config", None):
        for name in ("config.json", "project.json"):
            for directory in [path.resolve(), *path.resolve().parents][:21]:
                found = directory / sub / name if sub else directory / name
                if found.is_file():
                    return found
    return None


class AzureProvider(CloudProvider):
    name = "azure"
    extra = "azure"
    description = "Azure ML command jobs (PyTorch / MPI / TensorFlow / Ray distributions)"
    sdk_modules = ("azure.ai.ml", "azure.identity")
    Options = AzureOptions
    platform = "azure"
    # Azure ML job statuses (azure.ai.ml.operations._run_history_constants.JobStatus).
    states = {
        "NotStarted": State.PENDING, "Queued": State.PENDING, "Paused": State.PENDING,
        "Preparing": State.STARTING, "Provisioning": State.STARTING, "Starting": State.STARTING,
        "Running": State.RUNNING, "Finalizing": State.RUNNING, "CancelRequested": State.RUNNING,
        "Completed": State.SUCCEEDED, "Failed": State.FAILED, "Canceled": State.CANCELLED,
        "NotResponding": State.UNKNOWN, "Unknown": State.UNKNOWN,
    }

    status_poll = 5.0  # ARM allows a few reads per second per subscription
    stopping = ("CancelRequested",)
    # storage.inputs -> the job's inputs, storage.output -> its output STORAGE_OUTPUT (azureml:// only: see check)
    storage_schemes = DATA_SCHEMES
    # MLClient.jobs.download reads an output through its datastore (azure/ai/ml/_artifacts/
    # _artifact_utilities.py, download_artifact_from_aml_uri parses AzureMLDatastorePathUri):
    # storage.output must be an azureml:// datastore path for cloudtrain outputs to bring it back.
    output_schemes = ("azureml",)

    def __init__(self, ml_client=None, credential=None, client_kwargs: Optional[Dict[str, Any]] = None,
                 poll: Optional[float] = None):
        """``ml_client``: a ready MLClient; else ``credential`` (default: DefaultAzureCredential)
        and ``client_kwargs`` for MLClient (e.g. ``transport``); ``poll``: seconds between reads
        while following a job."""
        super().__init__(poll=poll)
        self._ml_client, self._credential, self._client_kwargs = ml_client, credential, dict(client_kwargs or {})
        self._ml_clients: Dict[Any, Any] = {}

    # -- what submit needs before it sends anything ------------------------------------------
    required = {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "my-resource-group",
                "workspace": "my-workspace"}
    WORKSPACE_HELP = ("name the workspace with subscription_id, resource_group and workspace, or put its config.json "
                      "(Azure portal > the workspace > Download config.json) in this directory or one above it")
    required_help = dict.fromkeys(required, WORKSPACE_HELP)

    def not_set(self, job: JobSpec, option: str, example: str) -> BadInput:
        """As every provider's, but the workspace's paragraph said once: on the first of its
        three names that is missing; the others point at it."""
        error = super().not_set(job, option, example)
        options = self.options(job)
        first = next((name for name in self.required if getattr(options, name, None) in (None, "")), option)
        if option == first or not isinstance(error, JobFileError):
            return error
        detail = error.detail.replace(f": {self.WORKSPACE_HELP}:", f" (the workspace, as providers.azure.{first} says):")
        return type(error)(detail, file=error.file, line=error.line, field=error.field)

    def fallback(self, option: str, job: JobSpec, options: AzureOptions) -> bool:
        """The workspace's three names come from its config.json when none of them is given
        (MLClient.from_config: ``config_file``, else config.json searched from here up)."""
        if self._ml_client is not None:
            return True
        if any(getattr(options, name) for name in self.required):
            return False
        return workspace_config(options.config_file) is not None

    def preflight(self, job: JobSpec, options: AzureOptions, problems) -> None:
        super().preflight(job, options, problems)
        if job.secrets:
            problems.add(self.job_error(job, ("secrets",), f"{', '.join(sorted(job.secrets))} cannot be sent to Azure ML: "
                                        "a command job's environment variables are stored and shown in clear. Put "
                                        "the value in the workspace's Key Vault and read it in the script with "
                                        "azure-keyvault-secrets and the compute's managed identity, then drop it "
                                        "from `secrets`"))

    @classmethod
    def instance_rules(cls):
        return infiniband.RULES

    @staticmethod
    def known_vm_size(job: JobSpec, options: AzureOptions) -> Optional[str]:
        """The VM size known without asking Azure: ``vm_size`` (checked against the catalog), or
        serverless compute's size resolved from ``resources`` (accelerator x gpus_per_node, or
        ``instance_type``).  A compute cluster's size is its own: nothing is resolved for it."""
        if options.compute and not options.vm_size:
            return None
        choice = choose(job, infiniband.RULES, options.vm_size)
        return choice.instance_type if choice else None

    @classmethod
    def options(cls, job: JobSpec) -> AzureOptions:
        """The section's options with the neutral spot (queue_settings.job_tier: spot) and
        max_runtime (limits.timeout) in them.  On a compute cluster, spot is the cluster's tier
        (AmlCompute ``tier``: ``low_priority`` or ``dedicated``, set when the cluster is made), not
        a job's setting: Azure's low-priority guide says "Per-job configuration isn't possible"
        (learn.microsoft.com/azure/machine-learning/how-to-use-low-priority-batch); submit reads
        the cluster's tier instead (``cluster_problems``)."""
        own = super().options(job)
        return with_neutral(job, cls.name, own, {
            "timeout": (("max_runtime",), job.max_runtime, job.max_runtime_text),
            "job_tier": (("spot",), "spot" if job.spot and not own.compute else None, "true"),
        })

    def validate(self, job: JobSpec, *, submit: bool = False, policy=()):
        """As every provider's, and say what render cannot know offline and submit checks
        (warnings at render, then submit's own check decides: no warning before an error)."""
        options = super().validate(job, submit=submit, policy=policy)
        for loc, message in self.unchecked_offline(job, options, submit):
            warnings.warn(CloudtrainWarning(str(self.job_error(job, loc, message))), stacklevel=2)
        return options

    def unchecked_offline(self, job: JobSpec, options: AzureOptions, submit: bool) -> List[Tuple[tuple, str]]:
        """(field, why) of each neutral field the render does not carry, with what happens to it."""
        found: List[Tuple[tuple, str]] = []
        r = job.resources
        cluster = options.compute if options.compute and not options.vm_size else None
        if not submit and job.secrets:
            found.append((("secrets",), f"{', '.join(sorted(job.secrets))} are not in this render: Azure ML stores a "
                                        "command job's variables in clear, so submit refuses them (use the workspace's "
                                        "Key Vault)"))
        if not submit and cluster and job.spot:
            found.append((("spot",), f"compute {cluster!r} is low priority or dedicated by its own tier (AmlCompute "
                                     "tier), not by the job; submit reads its tier and refuses a dedicated cluster"))
        if not submit and cluster and r.gpus_per_node:
            asked = f"{r.accelerator} x {r.gpus_per_node}" if r.accelerator else f"{r.gpus_per_node} GPUs"
            found.append((("resources", "accelerator" if r.accelerator else "gpus_per_node"),
                          f"{asked} is not checked against compute {cluster!r} offline (a cluster's VM size is its "
                          "own); submit reads its size (compute.get) and refuses a size without them; set "
                          "providers.azure.vm_size to the cluster's size to check it here"))
        if (r.cpus_per_node or r.memory_gb) and not r.gpus_per_node and not options.vm_size and not r.instance_type:
            field = "cpus_per_node" if r.cpus_per_node else "memory_gb"
            if cluster and not submit:
                found.append((("resources", field), f"is not checked against compute {cluster!r} offline; submit "
                                                    "reads its VM size and refuses one too small"))
            elif not cluster:
                found.append((("resources", field), "chooses no size on azure (its catalog holds GPU sizes only): "
                                                    "serverless compute runs Azure ML's default size; set "
                                                    "providers.azure.vm_size to a size that large"))
        for name, uri in sorted(job.storage.inputs.items()):
            ref = options.inputs.get(name)
            if self.looks_like_a_file(uri) and not (ref is not None and "type" in ref.model_fields_set):
                found.append((("storage", "inputs", name), f"{uri} is mounted as a folder (uri_folder); if it is one "
                                                           f"file, set providers.azure.inputs.{name}.type: uri_file"))
        return found

    @staticmethod
    def cluster_problems(job: JobSpec, compute: str, size: Optional[str], tier: Optional[str]) -> List[Tuple[tuple, str]]:
        """What the compute cluster ``compute`` (VM ``size``, AmlCompute ``tier``) cannot give the job."""
        found: List[Tuple[tuple, str]] = []
        if job.spot and tier and tier.replace("_", "").lower() != "lowpriority":
            found.append((("spot",), f"is true, but compute {compute!r} is {tier} (its VMs' tier is the cluster's: "
                                     "AmlCompute tier low_priority); use a low-priority cluster, drop "
                                     "providers.azure.compute for serverless spot, or set spot: false"))
        row = infiniband.catalog().get(size) if size else None
        r = job.resources
        if row is not None and r.gpus_per_node:
            if (r.accelerator and row.accelerator != r.accelerator) or row.count != r.gpus_per_node:
                found.append((("resources", "accelerator" if r.accelerator else "gpus_per_node"),
                              f"asks for {r.accelerator or 'a GPU'} x {r.gpus_per_node}, but compute {compute!r} runs "
                              f"{row.instance_type} ({row.accelerator_label()}); name a cluster of that size, or make "
                              "resources agree with the cluster"))
        if row is not None and not row.fits(r.cpus_per_node, r.memory_gb):
            found.append((("resources", "cpus_per_node" if r.cpus_per_node and (row.vcpus or 0) < r.cpus_per_node
                           else "memory_gb"),
                          f"is more than compute {compute!r} has ({row.instance_type}: {row.vcpus:g} vCPUs, "
                          f"{row.memory_gb:g} GiB); lower it or name a larger cluster"))
        return found

    def check(self, job: JobSpec, options: AzureOptions) -> None:
        if job.storage.checkpoint and CHECKPOINT_OUTPUT in options.outputs:
            raise JobFileError.at(job, ("providers", "azure", "outputs", CHECKPOINT_OUTPUT),
                              f"the name {CHECKPOINT_OUTPUT!r} holds storage.checkpoint; rename this output")
        checkpoint_uri(job, "Azure ML", ("azureml",), "azureml://datastores/workspaceblobstore/paths/ckpt/digits/")
        if not (options.environment or job.image):
            raise JobFileError.at(job, ("image",), "the azure provider needs an image (or providers.azure.environment, "
                                               "a registered Azure ML environment); set one")
        if job.max_restarts:
            raise JobFileError.at(job, ("max_restarts",), "Azure ML does not restart command jobs; set max_restarts: 0 "
                                                      "and submit again after a failure")
        known = self.known_vm_size(job, options)
        row = infiniband.catalog().get(known) if known else None
        r = job.resources
        if row is not None and not row.fits(r.cpus_per_node, r.memory_gb):
            field = "cpus_per_node" if r.cpus_per_node and (row.vcpus or 0) < r.cpus_per_node else "memory_gb"
            raise JobFileError.at(job, ("resources", field), f"is more than VM size {row.instance_type} has "
                                  f"({row.vcpus:g} vCPUs, {row.memory_gb:g} GiB); lower it, or name a larger size")
        if job.network.rdma == "on":
            size = known
            if size:
                problem = infiniband.rdma_problem(size)
                if problem:
                    raise JobFileError.at(job, ("network", "rdma"), problem)
            elif not options.compute:
                raise JobFileError.at(job, ("network", "rdma"), "network.rdma is on, but serverless compute has no VM size "
                                  "here; set resources.accelerator and gpus_per_node (or providers.azure.vm_size) to "
                                  f"an InfiniBand size such as {infiniband.DEFAULT_SUGGESTION}")
        outputs = {*options.outputs, *([CHECKPOINT_OUTPUT] if job.storage.checkpoint else []),
                   *([STORAGE_OUTPUT] if job.storage.output else [])}
        for kind, declared in (("inputs", {*options.inputs, *job.storage.inputs}), ("outputs", outputs)):
            for ref in re.findall(r"\$\{\{\s*%s\.([A-Za-z0-9_]+)\s*\}\}" % kind, job.command_line):
                if ref not in declared:
                    raise JobFileError.at(job, ("command",), f"refers to ${{{{{kind}.{ref}}}}}, but providers.azure.{kind} "
                                                         f"has no {ref!r}; declare it there")
        for name, ref in options.inputs.items():
            if not ref.path and name not in job.storage.inputs:
                raise JobFileError.at(job, ("providers", "azure", "inputs", name), "an input needs a path; set path")
        self.check_storage(job, options)

    @staticmethod
    def check_storage(job: JobSpec, options: AzureOptions) -> None:
        """``storage.output`` is a datastore URI (what ``cloudtrain outputs`` can bring back), its
        output name is free, and an input said twice says the same place."""
        output = job.storage.output
        if output and STORAGE_OUTPUT in options.outputs:
            raise JobFileError.at(job, ("providers", "azure", "outputs", STORAGE_OUTPUT),
                                  f"the name {STORAGE_OUTPUT!r} holds storage.output; rename this output")
        for name, uri in sorted(job.storage.inputs.items()):
            ref = options.inputs.get(name)
            if ref is not None and ref.path and ref.path != uri:
                raise JobFileError.at(job, ("storage", "inputs", name), f"is {uri} but providers.azure.inputs.{name} is "
                                      f"{ref.path}; keep one of them (providers.azure.inputs.{name} may give the type "
                                      "and mode alone)")

    def environment_variables(self, job: JobSpec, options: AzureOptions, vm_size: Optional[str] = None) -> Dict[str, str]:
        """The job's env, cloudtrain's variables for the node, and the NCCL/UCX presets of
        ``network.rdma`` (never over the job's own values).  Secrets are not here: see schedule."""
        kind = job.distribution.type
        env: Dict[str, str] = {"CLOUDTRAIN_DETECTORS": self.detectors_variable()}
        if not job.storage.output:  # else the command exports where Azure ML mounts the output
            env[storage.OUTPUT_ENV] = OUTPUT_DIR
        if kind in ("mpi", "horovod"):
            # No `cloudtrain launch` in between: what it would have exported, fixed per job.
            env.update({"CLOUDTRAIN_PLATFORM": self.name, "CLOUDTRAIN_DISTRIBUTION": kind,
                        "CLOUDTRAIN_NUM_NODES": str(job.distribution.nodes),
                        "CLOUDTRAIN_NPROC_PER_NODE": str(job.procs_per_node)})
        env.update(infiniband.rdma_env(job.network.rdma, vm_size or self.known_vm_size(job, options)))
        env.update(job.env)
        return env

    # Azure ML's mpirun starts every rank itself, with no `cloudtrain launch` to export where the
    # master is: each rank reads it from Azure's own variables, as cloudtrain_azure.detect does
    # (AZ_BATCH_MASTER_NODE=addr:port on several nodes, AZ_BATCHAI_MPI_MASTER_NODE=addr on one;
    # AZ_BATCH_HOST_LIST=ip,ip: seed 002 and tests/contract/platform_cases.py).
    MPI_MASTER = ('m="${AZ_BATCH_MASTER_NODE:-${AZ_BATCHAI_MPI_MASTER_NODE:-127.0.0.1}}"; '
                  'case "$m" in *:*) p="${m##*:}";; *) p=%d;; esac; '
                  'export CLOUDTRAIN_MASTER_ADDR="${m%%%%:*}" CLOUDTRAIN_MASTER_PORT="$p" '
                  'CLOUDTRAIN_HOSTS="${AZ_BATCH_HOST_LIST:-${m%%%%:*}}"; ')

    def node_command(self, job: JobSpec) -> str:
        kind = job.distribution.type
        if job.setup is not None and kind in ("mpi", "horovod", "ray"):  # no cloudtrain launch to run it
            raise JobFileError.at(job, ("setup",), f"azure starts {kind} jobs without cloudtrain launch, so setup "
                                  "cannot run once per node there; install it in the image (or use ddp)")
        if kind in ("mpi", "horovod"):
            from .detect import DEFAULT_MASTER_PORT
            return (self.MPI_MASTER % DEFAULT_MASTER_PORT
                    + shipping.with_launcher_path(["python3", "-m", "cloudtrain.launch.mpirank", "--", *job.argv]))
        return shipping.node_command(job, platform=self.name)

    @staticmethod
    def distribution(job: JobSpec) -> Optional[dict]:
        """The job YAML's ``distribution`` (None: a single-node job without one)."""
        d = job.distribution
        if d.type in ("ddp", "deepspeed") or (d.type in ("none", "ray") and d.nodes > 1):
            return {"type": "pytorch", "process_count_per_instance": 1}
        if d.type in ("mpi", "horovod"):
            return {"type": "mpi", "process_count_per_instance": job.procs_per_node}
        if d.type == "ps-worker":
            return {"type": "tensorflow", "parameter_server_count": job.ps, "worker_count": d.nodes - job.ps}
        return None

    @staticmethod
    def _data(ref: DataRef) -> dict:
        return {"type": ref.type, **{k: v for k, v in (("path", ref.path), ("mode", ref.mode)) if v}}

    @staticmethod
    def input_type(uri: str) -> str:
        """``uri_folder``, whatever the URI looks like: a folder's last segment may have a dot
        (``.../paths/v1.2``, ``imagenet.v2``) and nothing offline tells it from a file's.  It is
        also azure-ai-ml's own default for an input without a type (``Input(type="uri_folder")``,
        azure/ai/ml/entities/_inputs_outputs/input.py); ``providers.azure.inputs.NAME.type:
        uri_file`` says an input is one file."""
        return "uri_folder"

    @staticmethod
    def looks_like_a_file(uri: str) -> bool:
        """The URI's last segment has an extension (``vocab.txt``) and no trailing ``/``: maybe one file."""
        last = uri.rstrip("/").rsplit("/", 1)[-1]
        return not uri.endswith("/") and "." in last.strip(".")

    def job_inputs(self, job: JobSpec, options: AzureOptions) -> Dict[str, dict]:
        """providers.azure.inputs, and storage.inputs as read-only mounts (``ro_mount``; a
        providers.azure.inputs entry of the same name may set its type and mode)."""
        inputs = {k: self._data(v) for k, v in options.inputs.items()}
        for name, uri in sorted(job.storage.inputs.items()):
            ref = options.inputs.get(name)
            given = ref.model_fields_set if ref is not None else set()
            inputs[name] = {"type": ref.type if "type" in given else self.input_type(uri), "path": uri,
                            "mode": ref.mode if ref is not None and ref.mode else "ro_mount"}
        return inputs

    def job_dict(self, job: JobSpec, options: AzureOptions, vm_size: Optional[str] = None) -> dict:
        """The command job YAML (as a dict) that ``azure.ai.ml.load_job`` reads.

        Written out here rather than built with ``azure.ai.ml.command()``: the SDK takes about
        1.5 s to import, and render is a dry run that needs none of it.  The tests load this
        with ``load_job`` and compare its REST body with the one ``command()`` builds."""
        doc: Dict[str, Any] = {
            "$schema": JOB_SCHEMA,
            "type": "command",
            "display_name": job.name,
            "experiment_name": options.experiment_name or job.name,
            "tags": {"cloudtrain.job": job.name, "cloudtrain.distribution": job.distribution.type, **options.tags},
            "command": self.with_data_paths(job, self.node_command(job)),
            "code": str(job.code_path),
            "environment": options.environment or {"image": job.image},
            "environment_variables": self.environment_variables(job, options, vm_size),
        }
        resources: Dict[str, Any] = {"instance_count": job.distribution.nodes}
        if options.compute:
            doc["compute"] = f"azureml:{options.compute}"
        elif self.known_vm_size(job, options):
            resources["instance_type"] = self.known_vm_size(job, options)
        if job.resources.shm_gb:
            gb = job.resources.shm_gb
            resources["shm_size"] = f"{int(gb)}g" if float(gb).is_integer() else f"{round(gb * 1024)}m"
        doc["resources"] = resources
        dist = self.distribution(job)
        if dist is not None:
            doc["distribution"] = dist
        if options.timeout:
            doc["limits"] = {"timeout": options.timeout}
        if options.job_tier or options.priority:
            doc["queue_settings"] = {k: v for k, v in (("job_tier", options.job_tier),
                                                       ("priority", options.priority)) if v}
        if options.identity:
            doc["identity"] = {"type": options.identity}
        inputs = self.job_inputs(job, options)
        if inputs:
            doc["inputs"] = inputs
        outputs = {k: self._data(v) for k, v in options.outputs.items()}
        if job.storage.checkpoint:  # read-write mount of the datastore path: what one attempt saved, the next sees
            outputs[CHECKPOINT_OUTPUT] = {"type": "uri_folder", "path": job.storage.checkpoint, "mode": "rw_mount"}
        if job.storage.output:  # a read-write mount: what the nodes write there is in the datastore as they write it
            outputs[STORAGE_OUTPUT] = {"type": "uri_folder", "path": job.storage.output, "mode": "rw_mount"}
        if outputs:
            doc["outputs"] = outputs
        return doc

    @staticmethod
    def with_data_paths(job: JobSpec, command: str) -> str:
        """The node command with CLOUDTRAIN_CHECKPOINT_DIR, CLOUDTRAIN_INPUT_<NAME> and
        CLOUDTRAIN_OUTPUT_DIR exported as the paths where Azure ML mounts them.

        ``${{inputs.NAME}}``/``${{outputs.NAME}}`` are data bindings of the command: azure-ai-ml's
        schema says the command "may contain place holders of inputs" (azure/ai/ml/_schema/job/
        parameterized_command.py, ``ParameterizedCommandSchema.command``) and checks the bindings
        of the command alone (``CommandComponent._validate_command``); ``environment_variables`` is
        a plain dict.  So the paths are exported in the command, not set as variables."""
        paths = {}
        if job.storage.checkpoint:
            paths["CLOUDTRAIN_CHECKPOINT_DIR"] = f"outputs.{CHECKPOINT_OUTPUT}"
        for name in sorted(job.storage.inputs):
            paths[storage.input_env(name)] = f"inputs.{name}"
        if job.storage.output:
            paths[storage.OUTPUT_ENV] = f"outputs.{STORAGE_OUTPUT}"
        if not paths:
            return command
        return "export " + " ".join(f"{var}=${{{{{ref}}}}}" for var, ref in paths.items()) + f"; {command}"

    def artifacts(self, job: JobSpec, options: AzureOptions) -> List[Artifact]:
        return [Artifact(KIND, job.name, self.job_dict(job, options))]

    # -- clients -----------------------------------------------------------------------------
    def ml_client(self, subscription_id: Optional[str] = None, resource_group: Optional[str] = None,
                  workspace: Optional[str] = None, config_file: Optional[str] = None, submit: bool = False):
        """MLClient for a workspace given in full, or from the workspace's config.json; ``submit``:
        a job is at hand (a fix may name its options)."""
        if self._ml_client is not None:
            return self._ml_client
        if not (subscription_id or resource_group or workspace or config_file):  # no job: the config's workspace
            subscription_id, resource_group, workspace, config_file = map(self.account_option, WORKSPACE_OPTIONS)
        key = (subscription_id, resource_group, workspace, config_file)
        if key in self._ml_clients:
            return self._ml_clients[key]
        self.require_sdk("azure.ai.ml")
        from azure.ai.ml import MLClient
        credential = self._credential
        if credential is None:
            self.require_sdk("azure.identity")
            credential = _DefaultCredential()
        kwargs = dict(self._client_kwargs)
        kwargs.setdefault("show_progress", False)  # the upload's progress bar; the CLI has its own status line
        given = [v for v in (subscription_id, resource_group, workspace) if v]
        with _quiet_sdk():
            if len(given) == 3:
                client = MLClient(credential, subscription_id, resource_group, workspace, **kwargs)
            elif given:
                raise BadInput("give all of providers.azure.subscription_id, resource_group and workspace, "
                               "or none of them (then the workspace's config.json is used)")
            else:
                try:
                    client = MLClient.from_config(credential, path=config_file, **kwargs)
                except Exception as exc:  # the SDK's ValidationException: no or bad config.json
                    config = ("put the workspace's config.json (Azure portal > the workspace > Download "
                              "config.json) in this directory or one above it")
                    raise BadInput(f"no Azure ML workspace ({_first_line(exc)}); " + (
                        f"set providers.azure.subscription_id, resource_group and workspace, or {config}" if submit
                        else f"{config} (a handle names it in full: azure://SUBSCRIPTION/RESOURCE_GROUP/WORKSPACE/NAME)"
                    )) from None
        self._ml_clients[key] = client
        return client

    def _client_for(self, job_id: str):
        scope, name = _scope_of(job_id)
        return (self.ml_client(*scope) if scope else self.ml_client()), name

    @staticmethod
    def _qualified(ml, name: str) -> str:
        return f"{ml.subscription_id}/{ml.resource_group_name}/{ml.workspace_name}/{name}"

    # -- lifecycle ---------------------------------------------------------------------------
    def vm_size(self, ml, job: JobSpec, options: AzureOptions) -> Optional[str]:
        """The VM size the job runs on: known offline, or the cluster's (``compute.get``), after
        checking the cluster can give what the job asks (``cluster_problems``: exit 2)."""
        size = self.known_vm_size(job, options)
        if not options.compute or (size and not job.spot):
            return size
        with _platform_errors(f"reading compute {options.compute!r}",
                              not_found=f"the workspace has no compute {options.compute!r}; fix providers.azure.compute "
                                        "(az ml compute list shows them)"):
            compute = ml.compute.get(options.compute)
        size = size or getattr(compute, "size", None)
        for loc, message in self.cluster_problems(job, options.compute, size, getattr(compute, "tier", None)):
            raise JobFileError.at(job, loc, message)
        return size

    def _workspace(self, options: AzureOptions):
        return self.ml_client(options.subscription_id, options.resource_group, options.workspace, options.config_file,
                              submit=True)

    def _find_by_spec(self, rendered: Rendered, spec: str) -> Optional[str]:
        """The same spec and code were sent before (the job's name holds the hash): that job."""
        ml = self._workspace(rendered.options)
        name = f"{rendered.job.name}-{spec[:10]}"
        return self._qualified(ml, name) if self._get(ml, name, missing_ok=True) is not None else None

    def _create(self, rendered: Rendered, secrets: Dict[str, str], spec: str) -> str:
        job, options = rendered.job, rendered.options
        ml = self._workspace(options)
        name = f"{job.name}-{spec[:10]}"
        size = self.vm_size(ml, job, options)
        if job.network.rdma == "on" and size and infiniband.rdma_problem(size):
            raise JobFileError.at(job, ("network", "rdma"), f"{infiniband.rdma_problem(size)} (compute {options.compute!r})")
        content = json.loads(json.dumps(rendered.artifacts[0].content))
        content["name"] = name
        content.setdefault("tags", {})[SPEC_TAG] = spec
        env = content.setdefault("environment_variables", {})
        for key, value in infiniband.rdma_env(job.network.rdma, size).items():
            if key not in job.env:
                env.setdefault(key, value)
        with tempfile.TemporaryDirectory(prefix="cloudtrain-azure-") as tmp:
            staged = shipping.stage(job, Path(tmp) / (job.code_path.name or "code"), [self.node_platform()])
            content["code"] = str(staged)
            azure_job = self.load(content, Path(tmp) / "job.yml")
            with _platform_errors(f"creating job {name}"), _stderr_of_upload():
                ml.jobs.create_or_update(azure_job)
        return self._qualified(ml, name)

    @staticmethod
    def load(content: dict, path: Path):
        """The job YAML as the SDK's own job object (``load_job``)."""
        from azure.ai.ml import load_job
        path.write_text(yamlio.dump(content))
        with _quiet_sdk():
            try:
                return load_job(path)
            except Exception as exc:
                raise BadInput(f"Azure ML's SDK rejects the rendered job: {_first_line(exc)}; "
                               "check the job's providers.azure options") from None

    def _get(self, ml, name: str, missing_ok: bool = False):
        from azure.core.exceptions import ResourceNotFoundError
        try:
            with _platform_errors(f"reading job {name}", not_found=None):
                return ml.jobs.get(name)
        except ResourceNotFoundError:
            if missing_ok:
                return None
            raise JobNotFound(f"no azure job {name!r} in workspace {ml.workspace_name}; "
                              "cloudtrain list -p azure shows the jobs") from None

    def _describe(self, job_id: str):
        ml, name = self._client_for(job_id)
        return self._get(ml, name)

    def _to_status(self, job_id: str, job) -> JobStatus:
        raw = getattr(job, "status", None)
        raw = None if raw is None else str(getattr(raw, "value", raw))
        resources = getattr(job, "resources", None)
        created = getattr(getattr(job, "creation_context", None), "created_at", None)
        with _quiet_sdk():  # studio_url logs at INFO
            url = getattr(job, "studio_url", None) or ""
        return JobStatus(handle=self.handle(job_id), state=self.map_state(raw), raw_state=raw,
                         name=getattr(job, "display_name", None) or getattr(job, "name", None), message=url,
                         nodes=getattr(resources, "instance_count", None), created_at=timestamp(created))

    def _stop(self, job_id: str) -> None:
        ml, name = self._client_for(job_id)
        with _platform_errors(f"cancelling job {name}"):
            ml.jobs.begin_cancel(name).result()

    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """storage.output (the job's output ``cloudtrain_output``) into ``dest``, through
        ``MLClient.jobs.download``: the service resolves the output to its datastore path, the
        datastore hands out a SAS token, and azure-storage-blob lists and fetches the blobs."""
        ml, name = self._client_for(job_id)
        job = self._get(ml, name)
        if STORAGE_OUTPUT not in (getattr(job, "outputs", None) or {}):
            raise BadInput(f"azure job {name} has no storage.output, so there is nothing for cloudtrain to download; "
                           "what it wrote to ./outputs is in Azure ML studio (or: az ml job download --name "
                           f"{name} --all); set storage.output to an azureml:// datastore path for the next job")
        status = self._to_status(job_id, job)
        if not status.terminal:
            raise BadInput(f"azure job {name} is {status.raw_state}: its output can be downloaded once it ends; "
                           f"wait for it (cloudtrain wait {self.handle(job_id)})")
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".cloudtrain-download-", dir=dest) as tmp:
            with _platform_errors(f"downloading the output of job {name}"):
                ml.jobs.download(name, download_path=tmp, output_name=STORAGE_OUTPUT)
            got = Path(tmp) / "named-outputs" / STORAGE_OUTPUT  # where jobs.download puts a named output
            if not got.is_dir():
                raise BadInput(f"azure job {name} wrote nothing to its output ({job.outputs[STORAGE_OUTPUT].path}): "
                               "its nodes write there through CLOUDTRAIN_OUTPUT_DIR; check the script's output path")
            return copy_tree(got, dest)

    def list(self) -> List[JobStatus]:
        ml = self.ml_client()
        with _platform_errors("listing jobs"):
            jobs = [j for j in ml.jobs.list() if SPEC_TAG in (getattr(j, "tags", None) or {})]
        return [self._to_status(self._qualified(ml, j.name), j) for j in jobs]

    def _log_chunks(self, job_id: str, job, cursor: dict, final: bool) -> Iterator[str]:
        """The job's new user-log lines (``user_logs/std_log*.txt``), through the run-history
        calls ``jobs.stream`` makes (it prints to stdout and cannot be iterated)."""
        from azure.ai.ml._utils.utils import create_requests_pipeline_with_retry, download_text_from_url
        ml, name = self._client_for(job_id)
        if "pipeline" not in cursor:
            cursor["pipeline"] = create_requests_pipeline_with_retry(requests_pipeline=ml.jobs._requests_pipeline)
        done: Dict[str, int] = cursor.setdefault("done", {})
        with _platform_errors(f"reading the logs of job {name}"):
            details = ml.jobs._runs_operations.get_run_details(name)
            files = {k: v for k, v in (details.log_files or {}).items() if USER_LOG.match(k)}
            texts = {k: download_text_from_url(files[k], cursor["pipeline"]) for k in sorted(files)}
        for key, text in texts.items():
            lines = text.splitlines()
            if not final and text and not text.endswith("\n"):
                lines = lines[:-1]  # a line still being written
            prefix = f"[{key[len('user_logs/'):-len('.txt')]}] " if len(texts) > 1 else ""
            for line in lines[done.get(key, 0):]:
                yield prefix + line + "\n"
            done[key] = max(done.get(key, 0), len(lines))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[0] if lines else text


class _DefaultCredential:
    """``DefaultAzureCredential`` that tells no credential anywhere (every credential of its chain
    raised ``CredentialUnavailableError``: ``MissingCredentials``, raised while the first request
    asks for a token, before it is sent) from one that was refused (``ClientAuthenticationError``)."""

    def __init__(self):
        from azure.identity import DefaultAzureCredential
        self._chain = DefaultAzureCredential()
        self._links = [_Link(c) for c in self._chain.credentials]
        self._chain.credentials = tuple(self._links)

    def get_token(self, *scopes, **kwargs):
        from azure.core.exceptions import ClientAuthenticationError
        for link in self._links:
            link.unavailable = False
        try:
            with _quiet_identity():
                return self._chain.get_token(*scopes, **kwargs)
        except ClientAuthenticationError:
            if not all(link.unavailable for link in self._links):
                raise
        raise MissingCredentials(
            "Azure", "DefaultAzureCredential's " + ", ".join(link.name for link in self._links),
            "sign in with `az login`, or export AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (a service "
            "principal)")

    def close(self) -> None:
        self._chain.close()


class _Link:
    """One credential of the chain, noting whether it found nothing to use."""

    def __init__(self, credential):
        self.credential, self.unavailable = credential, False
        # a credential that failed to start stands in as FailedDACCredential, carrying its name
        self.name = getattr(credential, "_credential_name", None) or type(credential).__name__

    def get_token(self, *scopes, **kwargs):
        from azure.identity import CredentialUnavailableError
        try:
            return self.credential.get_token(*scopes, **kwargs)
        except CredentialUnavailableError:
            self.unavailable = True
            raise

    def __getattr__(self, name):
        return getattr(self.credential, name)


@contextlib.contextmanager
def _quiet_identity():
    """azure-identity's chain logs every credential it tried, with links, as a WARNING when none
    gave a token (``azure/identity/_credentials/chained.py``: ``_LOGGER.warning(message)``): Python's
    last-resort handler prints those ~15 lines on stderr before cloudtrain's own one line.  The
    caller says what happened (``MissingCredentials``, or the refusal's first line)."""
    import logging
    logger = logging.getLogger("azure.identity")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _quiet_sdk():
    """azure-ai-ml logs a warning for every experimental class it touches (and its marshmallow
    schemas warn of deprecations); keep stderr clean."""
    import logging
    import warnings
    logger = logging.getLogger("azure.ai.ml")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _stderr_of_upload():
    """The code upload prints colour codes to stderr even without a progress bar: drop them,
    pass anything else on."""
    import io
    import sys
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer):
            yield
    finally:
        text = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())
        if text.strip():
            sys.stderr.write(text)


@contextlib.contextmanager
def _platform_errors(what: str, not_found: Optional[str] = "re-check the name"):
    """Azure's errors as ``PlatformError`` (exit 3) with code, message and request id."""
    from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError, ResourceNotFoundError,
                                       ServiceRequestError)
    try:
        with _quiet_sdk():
            yield
    except ClientAuthenticationError as exc:
        raise PlatformError(f"Azure refused the credentials while {what}: {_first_line(exc)}; sign in again with "
                            "`az login`, or fix AZURE_TENANT_ID/AZURE_CLIENT_ID/AZURE_CLIENT_SECRET "
                            "(DefaultAzureCredential)", request_id=_request_id(exc)) from None
    except ResourceNotFoundError as exc:
        if not_found is None:
            raise
        raise PlatformError(f"Azure ML found nothing while {what}: {_error_text(exc)}; {not_found}",
                            request_id=_request_id(exc)) from None
    except HttpResponseError as exc:
        fix = {401: "sign in again (az login)", 403: "ask for a role on the workspace (AzureML Data Scientist)",
               429: "wait and try again (throttled)"}.get(exc.status_code or 0, "fix the request or try again later")
        raise PlatformError(f"Azure ML refused {what}: {_error_text(exc)}; {fix}", request_id=_request_id(exc)) from None
    except ServiceRequestError as exc:
        raise PlatformError(f"cannot reach Azure ML while {what}: {_first_line(exc)}; check the network "
                            "(proxy, firewall) and try again") from None
    except Exception as exc:
        from azure.ai.ml.exceptions import ErrorCategory, MlException
        if not isinstance(exc, MlException):
            raise
        if getattr(exc, "error_category", None) == ErrorCategory.USER_ERROR:
            raise BadInput(f"Azure ML's SDK refused {what}: {_first_line(exc)}; fix the job file or "
                           "providers.azure") from None
        raise PlatformError(f"Azure ML failed while {what}: {_first_line(exc)}; try again later") from None


def _error_text(exc) -> str:
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None) or getattr(exc, "reason", None) or exc.__class__.__name__
    message = getattr(error, "message", None) or _first_line(exc)
    return f"{exc.status_code or ''} {code}: {message}".strip()


def _request_id(exc) -> Optional[str]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for key in ("x-ms-request-id", "x-request-id", "x-ms-client-request-id"):
        if headers.get(key):
            return headers[key]
    return None
