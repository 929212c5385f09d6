"""``azure``: Azure ML command jobs through ``azure-ai-ml`` (``MLClient``).

Render (``render.build``) makes the typed ``AzureRequest``: the command job YAML that
``azure.ai.ml.load_job`` reads (printed as the ``azureml/job`` artifact), without importing the
SDK; the tests check it against what ``azure.ai.ml.command()`` builds.
Submit (core's one pipeline, then ``_create``) stages the code with the launcher bundle, writes
``AzureRequest.submitted`` next to it, loads it with ``load_job`` (``sdk.load_job``) and sends it
with ``MLClient.jobs.create_or_update``, so what is sent is what the render showed (plus the job
name, the spec tag, the staged code path and the InfiniBand presets of a cluster's VM size).

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

import re
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from cloudtrain.transfer import shipping
from cloudtrain.providers.cloud import CloudProvider, timestamp
from cloudtrain.spec.errors import BadInput, CloudtrainWarning, JobFileError, JobNotFound
from cloudtrain.spec.job import JobSpec
from cloudtrain.transfer.outputs import copy_tree
from cloudtrain.providers.provider import JobStatus, State
from cloudtrain.providers.request import Rendered
from cloudtrain.providers.survival import with_neutral
from cloudtrain.orchestrate.failures import CAPACITY, NODE_FAILURE, PREEMPTION

from . import checks, infiniband, render, sdk
from .options import AzureOptions
from .render import AzureRequest

WORKSPACE_OPTIONS = ("subscription_id", "resource_group", "workspace", "config_file")  # in MLClient's order
USER_LOG = re.compile(r"^user_logs/std_log.*\.txt$")


class AzureProvider(CloudProvider):
    name = "azure"
    extra = "azure"
    description = "Azure ML command jobs (PyTorch / MPI / TensorFlow / Ray distributions)"
    sdk_modules = ("azure.ai.ml", "azure.identity")
    Options = AzureOptions
    platform = "azure"
    # Azure Resource Manager's capacity and quota refusals ("Troubleshoot common Azure deployment
    # errors", learn.microsoft.com/azure/azure-resource-manager/troubleshooting/common-deployment-errors):
    # ``QuotaExceeded``, ``SkuNotAvailable``, ``AllocationFailed``, ``ZonalAllocationFailed``,
    # ``OverconstrainedAllocationRequest``; ``OperationNotAllowed`` is one only with a quota message
    # (ARM uses it for other refusals too).
    capacity_codes = frozenset({"QuotaExceeded", "SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed",
                                "OverconstrainedAllocationRequest"})
    quota_worded_codes = frozenset({"OperationNotAllowed"})
    # Azure ML job error codes (Azure ML REST JobBase error.code; "Troubleshoot job failures"): a
    # low-priority node's preemption is "NodePreempted"/"LowPriorityNodePreempted", capacity
    # refusals are "AllocationFailed"/"QuotaExceeded"/"ZonalAllocationFailed", a node lost is
    # "NodeFailure"/"NodeUnusable"/"DiskFull" of the node.
    failure_words = ((r"(?:LowPriority)?NodePreempted|[Pp]reempt", PREEMPTION),
                     (r"AllocationFailed|ZonalAllocationFailed|QuotaExceeded|SkuNotAvailable", CAPACITY),
                     (r"NodeFailure|NodeUnusable|NodeNotReady", NODE_FAILURE))

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """DefaultAzureCredential's sources, looked at offline (``sdk.offline_credentials``)."""
        return sdk.offline_credentials()
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
    no_code_upload = ("Azure ML's SDK uploads the job's code to the workspace's storage when cloudtrain submit "
                      "creates the job (jobs.create_or_update)")
    # storage.inputs -> the job's inputs, storage.output -> its output STORAGE_OUTPUT (azureml:// only: see check)
    storage_schemes = render.DATA_SCHEMES
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
        detail = error.detail.replace(f": {self.WORKSPACE_HELP}:",
                                      f" (the workspace, as providers.azure.{first} says):")
        return type(error)(detail, file=error.file, line=error.line, field=error.field)

    def fallback(self, option: str, job: JobSpec, options: AzureOptions) -> bool:
        """The workspace's three names come from its config.json when none of them is given
        (MLClient.from_config: ``config_file``, else config.json searched from here up)."""
        if self._ml_client is not None:
            return True
        if any(getattr(options, name) for name in self.required):
            return False
        return sdk.workspace_config(options.config_file) is not None

    def preflight(self, job: JobSpec, options: AzureOptions, problems) -> None:
        super().preflight(job, options, problems)
        if job.secrets:
            problems.add(self.job_error(job, ("secrets",), f"{', '.join(sorted(job.secrets))} cannot be sent to "
                                        "Azure ML: a command job's environment variables are stored and shown in "
                                        "clear. Put the value in the workspace's Key Vault and read it in the script "
                                        "with azure-keyvault-secrets and the compute's managed identity, then drop "
                                        "it from `secrets`"))

    @classmethod
    def instance_rules(cls):
        return infiniband.RULES

    @classmethod
    def options(cls, job: JobSpec) -> AzureOptions:
        """The section's options with the neutral spot (queue_settings.job_tier: spot) and
        max_runtime (limits.timeout) in them.  On a compute cluster, spot is the cluster's tier
        (AmlCompute ``tier``: ``low_priority`` or ``dedicated``, set when the cluster is made), not
        a job's setting: Azure's low-priority guide says "Per-job configuration isn't possible"
        (learn.microsoft.com/azure/machine-learning/how-to-use-low-priority-batch); submit reads
        the cluster's tier instead (``checks.cluster_problems``)."""
        own = super().options(job)
        return with_neutral(job, cls.name, own, {
            "timeout": (("max_runtime",), job.max_runtime, job.max_runtime_text),
            "job_tier": (("spot",), "spot" if job.spot and not own.compute else None, "true"),
        })

    def validate(self, job: JobSpec, *, submit: bool = False, policy=()):
        """As every provider's, and say what render cannot know offline and submit checks
        (warnings at render, then submit's own check decides: no warning before an error)."""
        options = super().validate(job, submit=submit, policy=policy)
        for loc, message in checks.unchecked_offline(job, options, submit):
            warnings.warn(CloudtrainWarning(str(self.job_error(job, loc, message))), stacklevel=2)
        return options

    def check(self, job: JobSpec, options: AzureOptions) -> None:
        checks.check(job, options)

    def render_request(self, job: JobSpec, options: AzureOptions) -> AzureRequest:
        return render.build(job, options, self.detectors_variable())

    # -- clients -----------------------------------------------------------------------------
    def ml_client(self, subscription_id: Optional[str] = None, resource_group: Optional[str] = None,
                  workspace: Optional[str] = None, config_file: Optional[str] = None, submit: bool = False):
        """MLClient for a workspace given in full, or from the workspace's config.json (one per
        workspace); ``submit``: a job is at hand (a fix may name its options)."""
        if self._ml_client is not None:
            return self._ml_client
        if not (subscription_id or resource_group or workspace or config_file):  # no job: the config's workspace
            subscription_id, resource_group, workspace, config_file = map(self.account_option, WORKSPACE_OPTIONS)
        key = (subscription_id, resource_group, workspace, config_file)
        if key not in self._ml_clients:
            self.require_sdk("azure.ai.ml")
            if self._credential is None:
                self.require_sdk("azure.identity")
            self._ml_clients[key] = sdk.make_ml_client(self._credential, self._client_kwargs, *key, submit=submit)
        return self._ml_clients[key]

    def _client_for(self, job_id: str):
        scope, name = sdk.job_scope(job_id)
        return (self.ml_client(*scope) if scope else self.ml_client()), name

    def _workspace(self, options: AzureOptions):
        return self.ml_client(options.subscription_id, options.resource_group, options.workspace, options.config_file,
                              submit=True)

    # -- lifecycle ---------------------------------------------------------------------------
    def vm_size(self, ml, job: JobSpec, options: AzureOptions) -> Optional[str]:
        """The VM size the job runs on: known offline, or the cluster's (``compute.get``), after
        checking the cluster can give what the job asks (``checks.cluster_problems``: exit 2)."""
        size = render.known_vm_size(job, options)
        if not options.compute or (size and not job.spot):
            return size
        with sdk.azure_errors(f"reading compute {options.compute!r}",
                              not_found=f"the workspace has no compute {options.compute!r}; fix "
                                        "providers.azure.compute (az ml compute list shows them)"):
            compute = ml.compute.get(options.compute)
        size = size or getattr(compute, "size", None)
        for loc, message in checks.cluster_problems(job, options.compute, size, getattr(compute, "tier", None)):
            raise JobFileError.at(job, loc, message)
        return size

    def _find_by_spec(self, rendered: Rendered[AzureRequest], spec: str) -> Optional[str]:
        """The same spec and code were sent before (the job's name holds the hash): that job."""
        ml = self._workspace(rendered.options)
        name = rendered.request.job_name(spec)
        try:
            self._get(ml, name)
        except JobNotFound:
            return None
        return sdk.job_id(ml, name)

    def _create(self, rendered: Rendered[AzureRequest], secrets: Dict[str, str], spec: str) -> str:
        job, options, request = rendered.job, rendered.options, rendered.request
        ml = self._workspace(options)
        size = self.vm_size(ml, job, options)
        if job.network.rdma == "on" and size and infiniband.rdma_problem(size):
            raise JobFileError.at(job, ("network", "rdma"),
                                  f"{infiniband.rdma_problem(size)} (compute {options.compute!r})")
        name = request.job_name(spec)
        with tempfile.TemporaryDirectory(prefix="cloudtrain-azure-") as tmp:
            code_name = job.code_path.name if job.code_path is not None else ""  # check refuses code: null
            staged = shipping.stage(job, Path(tmp) / (code_name or "code"), [self.node_platform()])
            content = request.submitted(spec, staged, infiniband.rdma_env(job.network.rdma, size))
            azure_job = sdk.load_job(content, Path(tmp) / "job.yml")
            with sdk.azure_errors(f"creating job {name}"), sdk.stderr_of_upload():
                ml.jobs.create_or_update(azure_job)
        return sdk.job_id(ml, name)

    def _get(self, ml, name: str):
        missing = JobNotFound(f"no azure job {name!r} in workspace {ml.workspace_name}; "
                              "cloudtrain list -p azure shows the jobs")
        with sdk.azure_errors(f"reading job {name}", not_found=missing):
            return ml.jobs.get(name)

    def _describe(self, job_id: str):
        ml, name = self._client_for(job_id)
        return self._get(ml, name)

    def _to_status(self, job_id: str, job) -> JobStatus:
        raw = getattr(job, "status", None)
        raw = None if raw is None else str(getattr(raw, "value", raw))
        resources = getattr(job, "resources", None)
        created = getattr(getattr(job, "creation_context", None), "created_at", None)
        with sdk.quiet_sdk():  # studio_url logs at INFO
            url = getattr(job, "studio_url", None) or ""
        state = self.map_state(raw)
        message = url
        if state is State.FAILED:  # the job entity has no error: run history says why (the controller reads it)
            ml, name = self._client_for(job_id)
            said = sdk.run_error(ml, name)
            message = f"{said} ({url})" if said and url else said or url
        return JobStatus(handle=self.handle(job_id), state=state, raw_state=raw,
                         name=getattr(job, "display_name", None) or getattr(job, "name", None), message=message,
                         nodes=getattr(resources, "instance_count", None), created_at=timestamp(created))

    def _stop(self, job_id: str) -> None:
        ml, name = self._client_for(job_id)
        with sdk.azure_errors(f"cancelling job {name}"):
            ml.jobs.begin_cancel(name).result()

    def checkpoint_store(self, url, job: JobSpec):
        """storage.checkpoint's datastore (``azureml://datastores/NAME/paths/PATH``), through the
        job's workspace: the controller carries a checkpoint to or from it."""
        from .datastore import AzureMLDatastoreStore
        return AzureMLDatastoreStore(self._workspace(self.options(job)))

    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """storage.output (the job's output ``cloudtrain_output``) into ``dest``, through
        ``MLClient.jobs.download``: the service resolves the output to its datastore path, the
        datastore hands out a SAS token, and azure-storage-blob lists and fetches the blobs."""
        output = render.STORAGE_OUTPUT
        ml, name = self._client_for(job_id)
        job = self._get(ml, name)
        if output not in (getattr(job, "outputs", None) or {}):
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
            with sdk.azure_errors(f"downloading the output of job {name}"):
                ml.jobs.download(name, download_path=tmp, output_name=output)
            got = Path(tmp) / "named-outputs" / output  # where jobs.download puts a named output
            if not got.is_dir():
                raise BadInput(f"azure job {name} wrote nothing to its output ({job.outputs[output].path}): "
                               "its nodes write there through CLOUDTRAIN_OUTPUT_DIR; check the script's output path")
            return copy_tree(got, dest)

    def list(self) -> List[JobStatus]:
        ml = self.ml_client()
        with sdk.azure_errors("listing jobs"):
            jobs = [j for j in ml.jobs.list() if render.SPEC_TAG in (getattr(j, "tags", None) or {})]
        return [self._to_status(sdk.job_id(ml, j.name), j) for j in jobs]

    def _log_chunks(self, job_id: str, job, cursor: dict, final: bool) -> Iterator[str]:
        """The job's new user-log lines (``user_logs/std_log*.txt``), a prefix naming the file
        when there are several."""
        ml, name = self._client_for(job_id)
        done: Dict[str, int] = cursor.setdefault("done", {})
        texts = sdk.log_texts(ml, name, cursor, USER_LOG)
        for key, text in texts.items():
            lines = text.splitlines()
            if not final and text and not text.endswith("\n"):
                lines = lines[:-1]  # a line still being written
            prefix = f"[{key[len('user_logs/'):-len('.txt')]}] " if len(texts) > 1 else ""
            for line in lines[done.get(key, 0):]:
                yield prefix + line + "\n"
            done[key] = max(done.get(key, 0), len(lines))
