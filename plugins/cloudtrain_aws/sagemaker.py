"""``sagemaker``: a SageMaker training job (CreateTrainingJob through boto3).

Rendering gives the exact request boto3's ``create_training_job`` takes (``sagemaker/CreateTrainingJob``)
and the code upload (``s3/PutObject``).  Every node runs the launcher shipped in the code archive
(``ContainerEntrypoint``/``ContainerArguments``), which reads SageMaker's node environment
(``cloudtrain_aws.detect``) and starts torchrun / mpirun / deepspeed / ray / TF_CONFIG.  Submitting
is idempotent: the job's name carries the hash of its spec, and a create that finds the name
taken attaches to that job.  The lifecycle is ``CloudProvider``'s: this module checks the
options and gives the SageMaker calls (``_create``, ``_describe``, ``_to_status``, ``_stop``,
``_log_chunks``); the request is built in ``render.py``, the options are ``options.py``'s.
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Dict, List, Optional

from cloudtrain.transfer import storage
from cloudtrain.providers.cloud import timestamp
from cloudtrain.spec.errors import CloudtrainWarning, PlatformError
from cloudtrain.catalogs.instances import Choice
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.provider import Cluster, JobStatus, State
from cloudtrain.providers.images import Pulls
from cloudtrain.providers.request import Placeholder, Rendered, fill
from cloudtrain.providers.survival import CHECKPOINT_LOC, at_most, checkpoint_uri, with_neutral
from cloudtrain.orchestrate.failures import CAPACITY, NODE_FAILURE, PREEMPTION

from .common import AwsProvider
from .instances import EFA_ENV, SAGEMAKER_RULES
from .options import SageMakerOptions
from .render import (create_training_job, CODE_CHANNEL, MAX_RUNTIME, NODE_MODULE, RETRY_SAYS, S3_URI, TAG_NAME,
                     SageMakerRequest, check_secret_ids, input_channels, job_name, parse_s3, sagemaker_instance,
                     sagemaker_request)

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class SageMakerProvider(AwsProvider):
    name = "sagemaker"
    # botocore's SageMaker service model: no member of CreateTrainingJob's input (ResourceConfig:
    # InstanceType, InstanceCount, VolumeSizeInGB, ...) sizes the container's /dev/shm
    refused_fields = {"resources.shm_gb": "SageMaker's CreateTrainingJob has no shared-memory (/dev/shm) setting: "
                                          "the platform sizes it"}
    description = "Amazon SageMaker training jobs (CreateTrainingJob)"
    # CloudWatch Logs: one stream per host, shown [algo-<i+1>] (_log_chunks): `cloudtrain logs --node i`
    log_selectors = frozenset({"node"})
    log_merged = "its CloudWatch streams are one per host ([algo-N], node N-1), with no rank in a line"
    # SageMaker training pulls from Amazon ECR, or from a private Docker registry reachable from the
    # job's VPC (``TrainingImageConfig``):
    # https://docs.aws.amazon.com/sagemaker/latest/dg/docker-containers-adapt-your-own-private-registry.html
    image_registries = Pulls("Amazon ECR (or a private registry in the job's VPC)",
                             (r"\d+\.dkr\.ecr(-fips)?\.[a-z0-9-]+\.amazonaws\.com(\.cn)?", r"public\.ecr\.aws"),
                             "push it to ECR "
                             "(docker tag + docker push <account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>)",
                             "https://docs.aws.amazon.com/sagemaker/latest/dg/docker-containers-adapt-your-own-"
                             "private-registry.html")
    # CreateTrainingJob's errors (API reference, CreateTrainingJob > Errors): ``ResourceLimitExceeded``
    # ("You have exceeded an SageMaker resource limit"); a job that fails before its first instance
    # starts with ``CapacityError`` (its FailureReason: "CapacityError: Unable to provision requested
    # ML compute capacity") is a capacity refusal too, and so is spot capacity lost before start
    # (``InsufficientCapacityError``): SageMaker accepts the job and fails it later.
    capacity_codes = frozenset({"ResourceLimitExceeded", "CapacityError", "InsufficientCapacityError"})
    refused_after_create = True
    # SageMaker restarts the job itself: RetryStrategy (render.py, create_training_job) and managed spot.
    restarts_itself = True
    # DescribeTrainingJob: FailureReason "CapacityError: Unable to provision requested ML compute
    # capacity" (API reference, DescribeTrainingJob > FailureReason); managed spot's SecondaryStatus
    # "Interrupted" ("the job stopped because the managed spot training instances were interrupted",
    # SecondaryStatusTransition > Status); "InternalServerError" is the one failure its RetryStrategy
    # retries (RetryStrategy reference): a node the platform lost.
    # "MaxWaitTimeExceeded" (SecondaryStatus of a Stopped job, same reference) ends a managed spot
    # job whose MaxWaitTimeInSeconds ("the amount of time spent waiting for Spot capacity plus the
    # amount of time the job can run", StoppingCondition reference) ran out: SageMaker's own
    # resumes after interruptions are used up, the spot capacity was taken away.
    failure_words = ((r"InsufficientCapacityError|CapacityError", CAPACITY),
                     (r"\bInterrupted\b|spot.{0,40}interrupt|MaxWaitTimeExceeded", PREEMPTION),
                     (r"InternalServerError", NODE_FAILURE))
    Options = SageMakerOptions
    catalog_refresh = "cloudtrain_aws.catalog_refresh:refresh"
    platform = "sagemaker"
    required = {"role_arn": "arn:aws:iam::123456789012:role/train", "output_s3": "s3://my-bucket/cloudtrain",
                "region": "us-east-1"}
    s3_options = ("output_s3", "code_s3", "checkpoint_s3", "inputs")
    storage_schemes = ("s3",)  # storage.inputs -> input channels, storage.output -> OutputDataConfig
    node_modules = (NODE_MODULE,)  # the node prelude, shipped in the code archive's launcher bundle

    @classmethod
    def _with_storage_output(cls, job: JobSpec, options):
        """The options with the neutral ``storage.output`` as ``output_s3`` (the same place said
        twice differently is refused at ``storage.output``)."""
        from cloudtrain.input.config import from_settings
        output = job.storage.output
        # a settings file's output_s3 is the account's default, which the job file's storage.output overrides
        if output and options.output_s3 and options.output_s3.rstrip("/") != output.rstrip("/") \
                and not from_settings(job, cls.name, "output_s3"):
            raise cls.job_error(job, ("storage", "output"), f"is {output} but providers.sagemaker.output_s3 is "
                                f"{options.output_s3}; keep one of them")
        return options.model_copy(update={"output_s3": output}) if output else options

    # The one table: SageMaker's status -> neutral.  While InProgress, the SecondaryStatus is
    # looked up; a terminal status is looked up as "Status/SecondaryStatus" first (a job stopped
    # for exceeding its run time failed, it was not cancelled), then as the status.
    states = {
        "Pending": State.PENDING, "Starting": State.STARTING, "LaunchingMLInstances": State.STARTING,
        "PreparingTrainingStack": State.STARTING, "Downloading": State.STARTING,
        "DownloadingTrainingImage": State.STARTING, "Restarting": State.STARTING,
        "Interrupted": State.STARTING, "Training": State.RUNNING, "Uploading": State.RUNNING,
        "Updating": State.RUNNING, "Stopping": State.RUNNING, "InProgress": State.RUNNING,
        "Completed": State.SUCCEEDED, "Failed": State.FAILED, "Stopped": State.CANCELLED,
        "Stopped/MaxRuntimeExceeded": State.FAILED, "Stopped/MaxWaitTimeExceeded": State.FAILED,
        "Deleting": State.CANCELLED,
    }

    @classmethod
    def map_state(cls, raw: Optional[str]) -> State:
        if raw is None:
            return State.UNKNOWN
        if raw in cls.states:
            return cls.states[raw]
        status, _, secondary = raw.partition("/")
        if status == "InProgress" and secondary in cls.states:
            return cls.states[secondary]
        return cls.states.get(status, State.UNKNOWN)

    # -- options and checks --------------------------------------------------------------------
    @classmethod
    def instance_rules(cls):
        return SAGEMAKER_RULES

    @classmethod
    def section_options(cls, job: JobSpec) -> SageMakerOptions:
        """``providers.sagemaker`` alone (what an emulated node needs: no neutral field checked)."""
        return super().options(job)

    @classmethod
    def options(cls, job: JobSpec) -> SageMakerOptions:
        """The section's options with the neutral spot, max_runtime, storage.output and
        storage.checkpoint in them."""
        options = cls._with_storage_output(job, cls.section_options(job))
        # botocore's service model sets no maximum on MaxRuntimeInSeconds, but its documentation
        # (SageMaker's API reference, StoppingCondition) says "The maximum value is 28 days."
        at_most(job, ("max_runtime",), job.max_runtime, MAX_RUNTIME,
                "SageMaker allows (StoppingCondition.MaxRuntimeInSeconds)")
        return with_neutral(job, cls.name, options, {
            "spot": (("spot",), job.spot),
            "max_runtime_seconds": (("max_runtime",), job.max_runtime, job.max_runtime_text),
            "checkpoint_s3": (CHECKPOINT_LOC, checkpoint_uri(job, "SageMaker", ("s3",), "s3://team/ckpt/digits/")),
        })

    @staticmethod
    def instance(job: JobSpec, options: SageMakerOptions) -> Choice:
        """The ml.* instance type (``render.sagemaker_instance``)."""
        return sagemaker_instance(job, options)

    @classmethod
    def instance_type(cls, job: JobSpec, options: SageMakerOptions) -> str:
        return cls.instance(job, options).instance_type

    def check(self, job: JobSpec, options: SageMakerOptions) -> None:
        if not (options.image or job.image):
            raise self.job_error(job, ("providers", "sagemaker", "image"), "sagemaker needs a training image; set "
                                 "`image` or providers.sagemaker.image (an ECR image URI)")
        self.instance_type(job, options)
        if bool(options.subnets) != bool(options.security_group_ids):
            raise self.job_error(job, ("providers", "sagemaker", "subnets"), "subnets and security_group_ids go "
                                 "together (VpcConfig); set both or neither")
        if (options.spot and options.max_wait_seconds is not None
                and options.max_wait_seconds < options.max_runtime_seconds):
            raise self.job_error(job, ("providers", "sagemaker", "max_wait_seconds"),
                                 f"must be >= max_runtime_seconds ({options.max_runtime_seconds})")
        check_secret_ids(job, "sagemaker", options.secrets_manager)
        if options.network_isolation and job.secrets:
            raise self.job_error(job, ("providers", "sagemaker", "network_isolation"), "a network-isolated container "
                                 "cannot read Secrets Manager; drop the job's secrets or network_isolation")
        for name in sorted(set(options.inputs) & set(job.storage.inputs)):
            if options.inputs[name] != job.storage.inputs[name]:
                raise self.job_error(job, ("storage", "inputs", name), f"is {job.storage.inputs[name]} but "
                                     f"providers.sagemaker.inputs.{name} is {options.inputs[name]}; keep one of them")
        if CODE_CHANNEL in job.storage.inputs:
            raise self.job_error(job, ("storage", "inputs", CODE_CHANNEL), "'code' is the channel of the shipped code; "
                                 "name this input otherwise")
        for name in options.inputs:
            if name == CODE_CHANNEL or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
                raise self.job_error(job, ("providers", "sagemaker", "inputs", name), f"channel name {name!r} is taken "
                                     "or invalid (letters, digits, . - _; not 'code')")
        channels = input_channels(job, options)
        for name in options.shard_inputs:
            if name not in channels:
                raise self.job_error(job, ("providers", "sagemaker", "shard_inputs"), f"{name!r} is not one of the "
                                     f"job's inputs ({', '.join(sorted(channels)) or 'none'}): storage.inputs or "
                                     "providers.sagemaker.inputs name them")
        self.check_limits(job, options)
        if job.max_restarts:
            warnings.warn(CloudtrainWarning(str(self.job_error(job, ("max_restarts",), RETRY_SAYS))), stacklevel=2)

    def check_limits(self, job: JobSpec, options: SageMakerOptions) -> None:
        """The request against every limit botocore's model states (``limits``): each one broken
        is an error at the job-file field that gave the value, all of them together."""
        from cloudtrain.spec.problems import Problems
        from .limits import request_violations
        request = fill(create_training_job(job, options, self.detectors_variable()),
                       {Placeholder.SPEC_HASH: "0" * 12, Placeholder.CODE_DIGEST: "0" * 64})
        problems = Problems()
        for path, problem in request_violations("sagemaker", "CreateTrainingJob", request):
            value = _at(request, path)
            if isinstance(value, str) and "<providers." in value:
                continue  # a placeholder: submit checks that the option is set
            loc, hint = self.field_of(job, options, request, path)
            if self.malformed_s3_option(options, loc):
                continue  # preflight says what is wrong with it, in its own words, once
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
            problems.add(self.job_error(job, loc, f"CreateTrainingJob's {where[1:]} {problem}{hint}"))
        problems.raise_all()

    def malformed_s3_option(self, options: SageMakerOptions, loc: tuple) -> bool:
        """``loc`` is an S3 option of ours whose value is no s3:// URI at all."""
        if loc[:2] != ("providers", "sagemaker") or len(loc) < 3 or loc[2] not in self.s3_options:
            return False
        value = getattr(options, loc[2], None)
        values = value.values() if isinstance(value, dict) else [value]
        return any(v is not None and not S3_URI.match(v) for v in values)

    @staticmethod
    def field_of(job: JobSpec, options: SageMakerOptions, request: dict, path: tuple):
        """(the job-file field that gave the request's value at ``path``, a hint how to fix it)."""
        head = path[0]
        mine = ("providers", "sagemaker")
        if head == "InputDataConfig":
            if len(path) == 1:
                return (("storage", "inputs") if job.storage.inputs else (*mine, "inputs")), \
                    "; use fewer inputs (one channel is the code's), e.g. one prefix with folders below it"
            name = request["InputDataConfig"][path[1]]["ChannelName"]
            if name == CODE_CHANNEL:
                return (*mine, "code_s3" if options.code_s3 else "output_s3"), ""
            return (("storage", "inputs", name) if name in job.storage.inputs else (*mine, "inputs", name)), ""
        if head == "Environment":
            name = path[1] if len(path) > 1 else None
            if name in job.env:
                return ("env", name), ""
            if name and name.startswith("CLOUDTRAIN_SECRET_IDS"):
                return (*mine, "secrets_manager"), "; use a shorter secret id (a name instead of an ARN)"
            if name == "CLOUDTRAIN_CHECKPOINT_DIR":
                return (*mine, "checkpoint_dir"), ""
            for input_name in job.storage.inputs:
                if name == storage.input_env(input_name):
                    return ("storage", "inputs", input_name), ""
            return ("env",), ""
        if head == "Tags":
            if len(path) == 1:
                return (*mine, "tags"), "; use fewer tags (cloudtrain adds 2 or 3 of its own)"
            key = request["Tags"][path[1]]["Key"]
            if key == TAG_NAME:
                return ("name",), ""
            if key == "cloudtrain:run-label":
                return (*mine, "run_label"), ""
            return (*mine, "tags", key) if key in options.tags else (*mine, "tags"), ""
        if head == "AlgorithmSpecification":
            if path[1:2] == ("TrainingImage",):
                return ((*mine, "image") if options.image else ("image",)), ""
            return ("command",), "; shorten the command (e.g. put options in a file)"
        members = {"Subnets": "subnets", "SecurityGroupIds": "security_group_ids", "VolumeSizeInGB": "volume_gb",
                   "KeepAlivePeriodInSeconds": "keep_alive_seconds", "InstanceType": "instance_type",
                   "LocalPath": "checkpoint_dir", "S3Uri": "checkpoint_s3", "S3OutputPath": "output_s3",
                   "MaxWaitTimeInSeconds": "max_wait_seconds", "KmsKeyId": "kms_key_id",
                   "VolumeKmsKeyId": "volume_kms_key_id", "MaxPendingTimeInSeconds": "max_pending_seconds",
                   "TrainingPlanArn": "training_plan_arn"}
        member = members.get(path[1]) if len(path) > 1 else None
        neutral = {"TrainingJobName": ("name",), "RetryStrategy": ("max_restarts",),
                   "StoppingCondition": ("max_runtime",) if member is None else None,
                   "ResourceConfig": ("distribution", "nodes") if path[1:2] == ("InstanceCount",) else None}
        option = member or {"RoleArn": "role_arn"}.get(head)
        return neutral.get(head) or ((*mine, option) if option else mine), ""

    # -- render (pure: render.py) --------------------------------------------------------------
    def render_request(self, job: JobSpec, options: SageMakerOptions) -> SageMakerRequest:
        return sagemaker_request(job, options, self.detectors_variable())

    # -- submit --------------------------------------------------------------------------------
    # states in which SageMaker is stopping the job already (cancel then sends nothing)
    stopping = ("Stopping", "Stopping/Stopping", "InProgress/Stopping")

    def _find_by_spec(self, rendered: Rendered, spec: str) -> Optional[str]:
        """None: ``CreateTrainingJob`` is the lookup.  The job's name holds the spec hash, so a
        create that finds the name taken attaches to that job (``_create``): one call, where a
        describe first would make two."""
        return None

    def _create(self, rendered: Rendered[SageMakerRequest], secrets: Dict[str, str], spec: str) -> str:
        sent: SageMakerRequest = rendered.request  # the code is in S3 already (CloudProvider.ship)
        region = self.region_of(sent.region, rendered.job)
        request = json.loads(json.dumps(sent.create))  # changed below: a copy
        request["TrainingJobName"] = name = job_name(rendered.job, spec)
        # a type the catalog knows had its EFA presets at render; a newer one is looked up in EC2
        if sent.efa_lookup and self.use_efa(rendered.job, sent.efa_lookup, region):
            for key, value in EFA_ENV.items():
                request.setdefault("Environment", {}).setdefault(key, value)
        self.folders_as_folders(request, region)
        from botocore.exceptions import ClientError
        with self.api(f"create the SageMaker training job {name}"):
            try:
                self.client("sagemaker", region).create_training_job(**request)
            except ClientError as exc:
                err = exc.response.get("Error", {})
                taken = err.get("Code") == "ResourceInUse" or (
                    err.get("Code") == "ValidationException" and "already exists" in err.get("Message", ""))
                if not taken:
                    raise
                # The name holds the spec's hash: this is the same job, created by an earlier
                # attempt (a retried create whose first response was lost, or a second submit).
        return f"{region}/{name}"

    def folders_as_folders(self, request: dict, region: str) -> None:
        """One meaning for an input URI everywhere: the object it names, or the objects below it as
        a folder (as ec2's copy takes it, ``cloudtrain_aws.node.below``).  An ``S3Prefix`` channel
        matches every key that *begins* with the prefix (botocore's model, ``S3DataSource.S3Uri``:
        "a key name prefix"), so ``s3://b/data/train`` would also bring ``data/train-archive/...``.
        At submit each input URI without a trailing ``/`` is looked up once (``HeadObject``): a key
        that is not an object is a folder, and its channel gets the ``/``.  Where S3 does not say
        (no read permission for the submitter: 403), the URI goes as written, with a warning."""
        from botocore.exceptions import ClientError
        for channel in request.get("InputDataConfig", []):
            source = channel["DataSource"]["S3DataSource"]
            uri = source["S3Uri"]
            if channel["ChannelName"] == CODE_CHANNEL or uri.endswith("/"):
                continue
            bucket, key = parse_s3(uri)
            if not key:
                continue
            try:
                with self.api(f"look up the input {uri}"):
                    try:
                        self.client("s3", region).head_object(Bucket=bucket, Key=key)
                    except ClientError as exc:
                        if str(exc.response.get("Error", {}).get("Code")) not in ("404", "NoSuchKey", "NotFound"):
                            raise
                        source["S3Uri"] = uri + "/"  # no such object: a folder
            except PlatformError as exc:
                warnings.warn(CloudtrainWarning(
                    f"cannot tell whether {uri} (input {channel['ChannelName']}) is an object or a folder ({exc}); "
                    f"SageMaker takes it as a key prefix, which also matches {key}-other/...: end a folder URI "
                    "with / to say it is one"), stacklevel=2)

    # -- outputs -------------------------------------------------------------------------------
    def outputs(self, job_id: str, dest):
        """SageMaker uploads /opt/ml/model (CLOUDTRAIN_OUTPUT_DIR) as the job's model.tar.gz
        (DescribeTrainingJob ``ModelArtifacts.S3ModelArtifacts``): fetch it and unpack it into ``dest``."""
        import tempfile
        from pathlib import Path
        from cloudtrain.spec.errors import BadInput
        from cloudtrain.launch.unpack import unpack
        region, name = self.split_id(job_id)
        uri = (self._describe(job_id).get("ModelArtifacts") or {}).get("S3ModelArtifacts")
        if not uri:
            raise BadInput(f"SageMaker has no model artifacts for {name} yet (they are uploaded when the job ends); "
                           f"wait for it (cloudtrain wait {self.handle(job_id)})")
        with tempfile.TemporaryDirectory(prefix="cloudtrain-outputs-") as tmp:
            self.download(uri, tmp, region)
            Path(dest).mkdir(parents=True, exist_ok=True)
            unpack(str(Path(tmp) / uri.rsplit("/", 1)[-1]), str(dest))
        return sorted(p for p in Path(dest).rglob("*") if p.is_file())

    # -- follow --------------------------------------------------------------------------------
    def _describe(self, job_id: str) -> dict:
        region, name = self.split_id(job_id)
        with self.api(f"describe the SageMaker training job {name}", job_id=job_id,
                      not_found=lambda code, msg: code == "ValidationException" and "not find" in msg.lower()):
            return self.client("sagemaker", region).describe_training_job(TrainingJobName=name)

    def _to_status(self, job_id: str, d: dict) -> JobStatus:
        status, secondary = d.get("TrainingJobStatus", "?"), d.get("SecondaryStatus") or ""
        raw = f"{status}/{secondary}" if secondary else status
        transitions = d.get("SecondaryStatusTransitions") or []
        detail = d.get("FailureReason") or (transitions[-1].get("StatusMessage") if transitions else "")
        message = f"{secondary}: {detail}" if secondary and detail else (secondary or detail or "")
        state = self.map_state(raw)
        return JobStatus(handle=self.handle(job_id), state=state, raw_state=raw, name=d.get("TrainingJobName"),
                         message=message, nodes=(d.get("ResourceConfig") or {}).get("InstanceCount"),
                         exit_code=state.exit_code if state.terminal else None,
                         created_at=timestamp(d.get("CreationTime")), started_at=timestamp(d.get("TrainingStartTime")),
                         ended_at=timestamp(d.get("TrainingEndTime")) if state.terminal else None,
                         restarts=self.restarts(transitions))

    @staticmethod
    def restarts(transitions: List[dict]) -> List[dict]:
        """SageMaker's own restarts from SecondaryStatusTransitions: ``Interrupted`` ("the managed
        spot training instances were interrupted", botocore's model), which SageMaker resumes, and
        a ``Restarting`` (a retry) that no interruption announced."""
        out: list = []
        previous = None
        for t in transitions:
            status = t.get("Status")
            if status == "Interrupted" or (status == "Restarting" and previous != "Interrupted"):
                out.append({"attempt": len(out) + 1, "reason": f"{status}: {t.get('StatusMessage') or ''}".rstrip(": "),
                            "at": timestamp(t.get("StartTime"))})
            previous = status
        return out

    def _log_chunks(self, job_id: str, described: Any, cursor: Dict[str, Any], final: bool) -> List[str]:
        """CloudWatch Logs: one stream per instance, ``<job>/algo-1-<epoch>``, shown as ``[algo-1]``."""
        region, name = self.split_id(job_id)

        def host(stream: str) -> str:  # "<job>/algo-1-1700000000" -> "algo-1"
            return stream[len(name) + 1:].rsplit("-", 1)[0] or stream
        return self.cloudwatch_chunk(region, LOG_GROUP, [name + "/"], host, cursor)

    def _stop(self, job_id: str) -> None:
        region, name = self.split_id(job_id)
        with self.api(f"stop the SageMaker training job {name}"):
            self.client("sagemaker", region).stop_training_job(TrainingJobName=name)

    def list(self) -> List[JobStatus]:
        """The region's 100 most recent training jobs that cloudtrain named (``<name>-<12 hex>``)."""
        import re
        region = self.region_of(None)
        sm = self.client("sagemaker", region)
        out = []
        with self.api("list SageMaker training jobs"):
            page = sm.list_training_jobs(SortBy="CreationTime", SortOrder="Descending", MaxResults=100)
        for s in page.get("TrainingJobSummaries", []):
            if not re.search(r"-[0-9a-f]{12}$", s["TrainingJobName"]):
                continue
            raw = s.get("TrainingJobStatus", "?") + (f"/{s['SecondaryStatus']}" if s.get("SecondaryStatus") else "")
            state = self.map_state(raw)
            out.append(JobStatus(handle=self.handle(f"{region}/{s['TrainingJobName']}"), state=state, raw_state=raw,
                                 name=s["TrainingJobName"], message=s.get("SecondaryStatus") or "",
                                 created_at=timestamp(s.get("CreationTime"))))
        return out

    # -- the data plane: what SageMaker's nodes see --------------------------------------------
    @classmethod
    def default_cluster(cls, job: JobSpec) -> Cluster:
        return Cluster(hosts=[f"algo-{i + 1}" for i in range(job.distribution.nodes)], master_port=7777)


def _at(request: Any, path: tuple) -> Any:
    for part in path:
        request = request[part]
    return request


def emulate(job: JobSpec, node_index: int, cluster: Cluster) -> Dict[str, str]:
    """What a SageMaker instance gives a container whose ``ContainerEntrypoint`` bypasses the
    training toolkit, as cloudtrain's does: the platform's ``TRAINING_JOB_NAME`` and its
    /opt/ml/input/config/resourceconfig.json, and no ``SM_*`` variable.

    The ``SM_*`` variables (``SM_HOSTS``, ``SM_CURRENT_HOST``, ``SM_MODEL_DIR``, ``SM_NUM_GPUS``,
    ``SM_MASTER_ADDR``, ...) are derived from those files inside the container by the toolkit or by
    the SageMaker SDK's driver (aws/sagemaker-python-sdk, sagemaker-train/src/sagemaker/train/
    container_drivers/scripts/environment.py: ``set_env()`` reads resourceconfig.json,
    inputdataconfig.json and hyperparameters.json and writes them to /opt/ml/input/sm_training.env;
    it only reads ``TRAINING_JOB_NAME`` from the environment the platform gives).  An emulated node
    is a process or container without /opt/ml, so the file's content travels in cloudtrain's own
    ``CLOUDTRAIN_SM_RESOURCECONFIG_JSON``, and what only an emulation needs (a rank where nodes share
    one address, the master port it picked, the run's output directory) in ``CLOUDTRAIN_*`` variables
    that a training script does not read: a script that needs ``SM_*`` fails here as on SageMaker."""
    current = cluster.hosts[node_index]
    with warnings.catch_warnings():  # the render says them; emulating a node repeats nothing
        warnings.simplefilter("ignore")
        kind = SageMakerProvider.instance(job, SageMakerProvider.section_options(job)).instance_type
    # resourceconfig.json's keys (environment.py reads current_host, current_instance_type, hosts and
    # network_interface_name); no network_interface_name here: emulated nodes talk over loopback or
    # Docker's bridge, and it would pin NCCL to an interface the node may not have
    config = {"current_host": current, "current_instance_type": kind, "current_group_name": "homogeneousCluster",
              "hosts": sorted(cluster.hosts)}
    env = {"TRAINING_JOB_NAME": job.name, "CLOUDTRAIN_SM_RESOURCECONFIG_JSON": json.dumps(config),
           "CLOUDTRAIN_SM_MASTER_PORT": str(cluster.master_port)}
    if len(set(cluster.hosts)) < len(cluster.hosts):
        # SageMaker ranks nodes by the sorted host list (see detect.py); nodes sharing an address
        # (local's 127.0.0.1) cannot be told apart by it and keep their index as their rank
        env["CLOUDTRAIN_SM_HOST_RANK"] = str(node_index)
    if cluster.output_dir:
        env["CLOUDTRAIN_OUTPUT_DIR"] = cluster.output_dir
    return env
