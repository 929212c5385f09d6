"""``sagemaker``: a SageMaker training job (CreateTrainingJob through boto3).

Rendering gives the exact request boto3's ``create_training_job`` takes (``sagemaker/CreateTrainingJob``)
and the code upload (``s3/PutObject``).  Every node runs the launcher shipped in the code archive
(``ContainerEntrypoint``/``ContainerArguments``), which reads SageMaker's node environment
(``cloudtrain_aws.detect``) and starts torchrun / mpirun / deepspeed / ray / TF_CONFIG.  Submitting
is idempotent: the job's name carries the hash of its spec, and a create that finds the name
taken attaches to that job.  The lifecycle is ``CloudProvider``'s: this module gives the
SageMaker calls (``_create``, ``_describe``, ``_to_status``, ``_stop``, ``_log_chunks``).
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain import shipping, storage
from cloudtrain.launch import sshd
from cloudtrain.launch.unpack import BOOTSTRAP
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.cloud import timestamp
from cloudtrain.catalog import Instance
from cloudtrain.instances import Choice, choose, cpu_default
from cloudtrain.errors import CloudtrainWarning, PlatformError
from cloudtrain.job import JobSpec
from cloudtrain.provider import Artifact, Cluster, JobStatus, Rendered, State
from cloudtrain.survival import CHECKPOINT_LOC, at_most, checkpoint_uri, with_neutral

from .common import (CODE_DIGEST, S3_URI, EFA_ENV, NODE_MODULE, SPEC_HASH, TAG_HASH, TAG_NAME, AwsProvider, artifact,
                     check_secret_ids, env_names_variables, secret_id_variables, secrets_artifact, fill, job_name, join_s3, parse_s3, strip_empty)
from .instances import SAGEMAKER_RULES, efa_devices, efa_env

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
CODE_CHANNEL = "code"
ROLE_PLACEHOLDER = "<providers.sagemaker.role_arn>"
OUTPUT_PLACEHOLDER = "s3://<providers.sagemaker.output_s3>"
INPUT_DATA_DIR = "/opt/ml/input/data"  # a File-mode channel's local directory: /opt/ml/input/data/<channel>
# The container's first step: check and unpack the code channel's archive, then exec the launcher.
# ContainerEntrypoint is ["/bin/sh", "-c", BOOT, "cloudtrain", BOOTSTRAP, <archive sha256>]
# and SageMaker appends ContainerArguments (the launcher's argv, the image's Python first): so
# "$1" is the bootstrap's Python, "$2" the digest, "$3" the Python that runs it.  Each item is
# limited to 256 characters (botocore: TrainingContainerEntrypointString), so this stays short.
BOOT = ('set -e; d="${CLOUDTRAIN_CODE_DIR:-/opt/ml/code}"; '
        '"$3" -c "$1" --sha256 "$2" "${SM_CHANNEL_CODE:-/opt/ml/input/data/code}/code.tar.gz" "$d"; shift 2; '
        'cd "$d"; export PYTHONPATH="$d/.cloudtrain${PYTHONPATH:+:$PYTHONPATH}"; exec "$@"')
MAX_ARG = 256
# botocore's model, RetryStrategy: "The retry strategy to use when a training job fails due to an
# InternalServerError"; MaximumRetryAttempts: "When the job is retried, it's SecondaryStatus is
# changed to STARTING".  A failure of the job's own code is AlgorithmError, never retried.
RETRY_SAYS = ("SageMaker retries the job (RetryStrategy) only after an InternalServerError of its own; a "
              "failure of the job's code (a crash, out of memory, an NCCL timeout) ends it FAILED and is not "
              "restarted; SageMaker resumes an interrupted spot job by itself")
MAX_RUNTIME = 28 * 86400  # seconds: StoppingCondition.MaxRuntimeInSeconds and MaxWaitTimeInSeconds
NAME_RE = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"


class SageMakerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role_arn: Optional[str] = Field(None, description="IAM role the job runs as (needed to submit), e.g. arn:aws:iam::123456789012:role/train")
    output_s3: Optional[str] = Field(None, description="s3://bucket/prefix for the job's outputs: model.tar.gz holds what the job wrote to CLOUDTRAIN_OUTPUT_DIR (needed to submit)")
    code_s3: Optional[str] = Field(None, description="s3://bucket/prefix for the code archives (default: <output_s3>/cloudtrain-code)")
    region: Optional[str] = Field(None, description="AWS region (default: boto3's: AWS_DEFAULT_REGION, the profile's region)")
    image: Optional[str] = Field(None, description="training image, e.g. an ECR URI (default: the job's image)")
    instance_type: Optional[str] = Field(None, description="ml.* instance type (default: resolved from resources.accelerator x gpus_per_node or resources.instance_type, see docs/resources.md; ml.m5.xlarge without GPUs)")
    volume_gb: int = Field(30, ge=1, le=16384, description="EBS volume per instance, GiB")
    max_runtime_seconds: int = Field(86400, ge=1, le=2419200, description="StoppingCondition.MaxRuntimeInSeconds: SageMaker stops the job after this")
    spot: bool = Field(False, description="managed spot training (EnableManagedSpotTraining); checkpoints default to <output_s3>/<name>/checkpoints")
    max_wait_seconds: Optional[int] = Field(None, ge=1, le=2419200, description="spot: MaxWaitTimeInSeconds, run time plus waiting for capacity (default: 2 x max_runtime_seconds)")
    checkpoint_s3: Optional[str] = Field(None, description="s3:// URI SageMaker syncs checkpoint_dir with (CheckpointConfig)")
    checkpoint_dir: str = Field("/opt/ml/checkpoints", description="checkpoint directory in the container (CLOUDTRAIN_CHECKPOINT_DIR)")
    inputs: Dict[str, str] = Field(default_factory=dict, description="input channels: name -> s3:// URI, downloaded to /opt/ml/input/data/<name>")
    subnets: List[str] = Field(default_factory=list, max_length=16, description="VpcConfig subnets (with security_group_ids)")
    security_group_ids: List[str] = Field(default_factory=list, max_length=5, description="VpcConfig security groups (with subnets)")
    network_isolation: bool = Field(False, description="EnableNetworkIsolation: the container has no network access")
    encrypt_inter_node_traffic: bool = Field(False, description="EnableInterContainerTrafficEncryption")
    keep_alive_seconds: Optional[int] = Field(None, ge=0, le=3600, description="warm pool: keep the instances this long after the job (KeepAlivePeriodInSeconds)")
    secrets_manager: Dict[str, str] = Field(default_factory=dict, description="where each of the job's secrets is read in the node: NAME -> Secrets Manager ARN or name (ARN#key for a JSON key)")
    tags: Dict[str, str] = Field(default_factory=dict, description="extra tags of the training job")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    run_label: Optional[str] = Field(None, description="any label: changing it makes an otherwise identical job a new one (the spec hash changes)")


# ml.m5.xlarge: 4 vCPUs, 16 GiB (aws.amazon.com/sagemaker/pricing, "Instance details"; EC2's m5.xlarge)
CPU_DEFAULT = Instance("ml.m5.xlarge", vcpus=4, memory_gb=16)


class SageMakerProvider(AwsProvider):
    name = "sagemaker"
    # botocore's SageMaker service model: no member of CreateTrainingJob's input (ResourceConfig:
    # InstanceType, InstanceCount, VolumeSizeInGB, ...) sizes the container's /dev/shm
    refused_fields = {"resources.shm_gb": "SageMaker's CreateTrainingJob has no shared-memory (/dev/shm) setting: "
                                          "the platform sizes it"}
    description = "Amazon SageMaker training jobs (CreateTrainingJob)"
    Options = SageMakerOptions
    catalog_refresh = "cloudtrain_aws.catalog_refresh:refresh"
    platform = "sagemaker"
    required = {"role_arn": "arn:aws:iam::123456789012:role/train", "output_s3": "s3://my-bucket/cloudtrain",
                "region": "us-east-1"}
    s3_options = ("output_s3", "code_s3", "checkpoint_s3", "inputs")
    storage_schemes = ("s3",)  # storage.inputs -> input channels, storage.output -> OutputDataConfig

    @classmethod
    def _with_storage_output(cls, job: JobSpec, options):
        """The options with the neutral ``storage.output`` as ``output_s3`` (the same place said
        twice differently is refused at ``storage.output``)."""
        output = job.storage.output
        if output and options.output_s3 and options.output_s3.rstrip("/") != output.rstrip("/"):
            raise cls.job_error(job, ("storage", "output"), f"is {output} but providers.sagemaker.output_s3 is "
                                f"{options.output_s3}; keep one of them")
        return options.model_copy(update={"output_s3": output}) if output else options

    @staticmethod
    def input_channels(job: JobSpec, options: SageMakerOptions) -> Dict[str, str]:
        """Channel name -> S3 URI: providers.sagemaker.inputs and the neutral storage.inputs."""
        return {**options.inputs, **job.storage.inputs}
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

    # -- render (pure) -------------------------------------------------------------------------
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
        at_most(job, ("max_runtime",), job.max_runtime, MAX_RUNTIME, "SageMaker allows (StoppingCondition.MaxRuntimeInSeconds)")
        return with_neutral(job, cls.name, options, {
            "spot": (("spot",), job.spot),
            "max_runtime_seconds": (("max_runtime",), job.max_runtime, job.max_runtime_text),
            "checkpoint_s3": (CHECKPOINT_LOC, checkpoint_uri(job, "SageMaker", ("s3",), "s3://team/ckpt/digits/")),
        })

    @staticmethod
    def instance(job: JobSpec, options: SageMakerOptions) -> Choice:
        """The ml.* instance type (from the catalog: resources.accelerator x gpus_per_node, or the
        named one, checked); ml.m5.xlarge for a job without GPUs."""
        return choose(job, SAGEMAKER_RULES, options.instance_type) or cpu_default(job, SAGEMAKER_RULES, CPU_DEFAULT)

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
        if options.spot and options.max_wait_seconds is not None and options.max_wait_seconds < options.max_runtime_seconds:
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
        self.check_limits(job, options)
        if job.max_restarts:
            warnings.warn(CloudtrainWarning(str(self.job_error(job, ("max_restarts",), RETRY_SAYS))), stacklevel=2)

    def check_limits(self, job: JobSpec, options: SageMakerOptions) -> None:
        """The request against every limit botocore's model states (``limits``): each one broken
        is an error at the job-file field that gave the value, all of them together."""
        from cloudtrain.problems import Problems
        from .limits import request_violations
        request = fill(self.request(job, options), {SPEC_HASH: "0" * 12, CODE_DIGEST: "0" * 64})
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
        member = {"Subnets": "subnets", "SecurityGroupIds": "security_group_ids", "VolumeSizeInGB": "volume_gb",
                  "KeepAlivePeriodInSeconds": "keep_alive_seconds", "InstanceType": "instance_type",
                  "LocalPath": "checkpoint_dir", "S3Uri": "checkpoint_s3", "S3OutputPath": "output_s3",
                  "MaxWaitTimeInSeconds": "max_wait_seconds"}.get(path[1] if len(path) > 1 else None)
        neutral = {"TrainingJobName": ("name",), "RetryStrategy": ("max_restarts",),
                   "StoppingCondition": ("max_runtime",) if member is None else None,
                   "ResourceConfig": ("distribution", "nodes") if path[1:2] == ("InstanceCount",) else None}
        option = member or {"RoleArn": "role_arn"}.get(head)
        return neutral.get(head) or ((*mine, option) if option else mine), ""

    @staticmethod
    def container_arguments(job: JobSpec, options: SageMakerOptions) -> List[str]:
        launch = shipping.launch_argv(job, platform="sagemaker", python=options.python)
        flags = ["--sshd"] if SageMakerProvider.uses_ssh(job) else []
        # the node prelude: job id, Secrets Manager, sshd for mpirun; then the launcher
        return [options.python, "-m", NODE_MODULE.partition(":")[0], *flags, "--", *launch]

    def environment_request(self, job: JobSpec, options: SageMakerOptions, efa: bool = False) -> Dict[str, str]:
        env = dict(job.env)
        env.update({
            "CLOUDTRAIN_DETECTORS": self.detectors_variable(),
        })
        env.update(env_names_variables([*job.env, *job.secrets]))
        if self.checkpoint_s3(job, options):
            env["CLOUDTRAIN_CHECKPOINT_DIR"] = options.checkpoint_dir
        for name in job.storage.inputs:  # SageMaker downloads channel <name> here before the command
            env[storage.input_env(name)] = f"{INPUT_DATA_DIR}/{name}"
        if options.secrets_manager:
            env.update(secret_id_variables(options.secrets_manager))
        if job.distribution.type in ("mpi", "horovod"):
            env.setdefault("OMPI_MCA_plm_rsh_args", sshd.CLIENT_OPTIONS)
            if self.uses_ssh(job):  # the prelude's sshd forks before it listens: node 0 waits for it
                env[SSH_WAIT] = str(sshd.SSHD_PORT)
        row = self.instance(job, options).row
        if efa or sagemaker_efa(job.network.rdma, row):
            for key, value in efa_env(row).items():
                env.setdefault(key, value)
        return env

    @staticmethod
    def checkpoint_s3(job: JobSpec, options: SageMakerOptions) -> Optional[str]:
        if options.checkpoint_s3:
            return options.checkpoint_s3
        if options.spot:
            return join_s3(options.output_s3 or OUTPUT_PLACEHOLDER, job.name, "checkpoints")
        return None

    @staticmethod
    def code_location(options: SageMakerOptions) -> str:
        base = options.code_s3 or join_s3(options.output_s3 or OUTPUT_PLACEHOLDER, "cloudtrain-code")
        return join_s3(base, CODE_DIGEST, "code.tar.gz")

    def request(self, job: JobSpec, options: SageMakerOptions) -> dict:
        code_uri = self.code_location(options)
        channels = [{"ChannelName": CODE_CHANNEL, "InputMode": "File", "CompressionType": "None",
                     "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": code_uri,
                                                     "S3DataDistributionType": "FullyReplicated"}}}]
        for name, uri in sorted(self.input_channels(job, options).items()):
            channels.append({"ChannelName": name, "InputMode": "File",
                             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                                             "S3DataDistributionType": "FullyReplicated"}}})
        resources = {"InstanceType": self.instance_type(job, options), "InstanceCount": job.distribution.nodes,
                     "VolumeSizeInGB": options.volume_gb}
        if options.keep_alive_seconds is not None:
            resources["KeepAlivePeriodInSeconds"] = options.keep_alive_seconds
        stopping = {"MaxRuntimeInSeconds": options.max_runtime_seconds}
        if options.spot:
            stopping["MaxWaitTimeInSeconds"] = options.max_wait_seconds or min(2 * options.max_runtime_seconds, MAX_RUNTIME)
        checkpoint = self.checkpoint_s3(job, options)
        tags = [{"Key": TAG_NAME, "Value": job.name}, {"Key": TAG_HASH, "Value": SPEC_HASH}]
        tags += [{"Key": k, "Value": v} for k, v in sorted(options.tags.items())]
        if options.run_label:
            tags.append({"Key": "cloudtrain:run-label", "Value": options.run_label})
        return strip_empty({
            "TrainingJobName": f"{job.name[:50].rstrip('-')}-{SPEC_HASH}",
            "RoleArn": options.role_arn or ROLE_PLACEHOLDER,
            "AlgorithmSpecification": {
                "TrainingImage": options.image or job.image,
                "TrainingInputMode": "File",
                "ContainerEntrypoint": ["/bin/sh", "-c", BOOT, "cloudtrain", BOOTSTRAP, CODE_DIGEST],
                "ContainerArguments": self.container_arguments(job, options),
            },
            "InputDataConfig": channels,
            "OutputDataConfig": {"S3OutputPath": options.output_s3 or OUTPUT_PLACEHOLDER},
            "ResourceConfig": resources,
            "StoppingCondition": stopping,
            "Environment": self.environment_request(job, options),
            "RetryStrategy": {"MaximumRetryAttempts": job.max_restarts} if job.max_restarts else None,
            "CheckpointConfig": {"S3Uri": checkpoint, "LocalPath": options.checkpoint_dir} if checkpoint else None,
            "VpcConfig": {"SecurityGroupIds": list(options.security_group_ids), "Subnets": list(options.subnets)}
            if options.subnets else None,
            "EnableNetworkIsolation": options.network_isolation or None,
            "EnableInterContainerTrafficEncryption": options.encrypt_inter_node_traffic or None,
            "EnableManagedSpotTraining": options.spot or None,
            "Tags": tags,
        })

    def artifacts(self, job: JobSpec, options: SageMakerOptions) -> List[Artifact]:
        bucket, key = parse_s3(self.code_location(options)) if (options.code_s3 or options.output_s3) \
            else ("<providers.sagemaker.output_s3>", f"cloudtrain-code/{CODE_DIGEST}/code.tar.gz")
        upload = {"Bucket": bucket, "Key": key, "ContentType": "application/gzip"}
        out = [Artifact("s3/PutObject", "code", upload),
               Artifact("sagemaker/CreateTrainingJob", job.name, self.request(job, options))]
        secrets = secrets_artifact(job, self.name, options.secrets_manager)
        return out + ([secrets] if secrets else [])

    # -- submit --------------------------------------------------------------------------------
    def ship_code(self, rendered: Rendered) -> List[str]:
        """The code archive to the rendered ``s3/PutObject``'s bucket and key (its digest filled
        in), unless it is there already: what ``_create`` uploads before it creates the job."""
        job, options = rendered.job, rendered.options
        targets = [self.detector_target(), NODE_MODULE]
        upload = fill(artifact(rendered, "s3/PutObject"), self.code_values(job, "", targets))
        self.upload_code(job, upload, targets, self.region_of(options.region, job))
        return [f"s3://{upload['Bucket']}/{upload['Key']}"]

    # states in which SageMaker is stopping the job already (cancel then sends nothing)
    stopping = ("Stopping", "Stopping/Stopping", "InProgress/Stopping")

    def _find_by_spec(self, rendered: Rendered, spec: str) -> Optional[str]:
        """None: ``CreateTrainingJob`` is the lookup.  The job's name holds the spec hash, so a
        create that finds the name taken attaches to that job (``_create``): one call, where a
        describe first would make two."""
        return None

    def _create(self, rendered: Rendered, secrets: Dict[str, str], spec: str) -> str:
        job, options = rendered.job, rendered.options  # preflight checked the options submit needs
        region = self.region_of(options.region, job)
        targets = [self.detector_target(), NODE_MODULE]
        values = self.code_values(job, spec, targets)
        request = fill(artifact(rendered, "sagemaker/CreateTrainingJob"), values)
        request["TrainingJobName"] = name = job_name(job, spec)
        # a type the catalog knows had its EFA presets at render; a newer one is looked up in EC2
        efa = self.instance(job, options).row is None and self.use_efa(job, request["ResourceConfig"]["InstanceType"],
                                                                       region)
        if efa:
            for key, value in EFA_ENV.items():
                request.setdefault("Environment", {}).setdefault(key, value)
        self.ship_code(rendered)
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
        from cloudtrain.errors import BadInput
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
        out, previous = [], None
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


# The ml.* types SageMaker's own SDK drivers give the EFA settings (FI_PROVIDER=efa): aws/sagemaker-python-sdk,
# sagemaker-train/src/sagemaker/train/container_drivers/common/utils.py, SM_EFA_NCCL_INSTANCES.  EC2 says
# more types have an EFA device (ml.g5.12xlarge: one), but SageMaker's drivers treat only these as EFA.
# The list lags new types (ml.p5e.48xlarge was added after the SDK's issue #5491), so a type whose EFA
# does RDMA read (p4d and later, the catalog's efa_rdma_read) counts too.
SDK_EFA_TYPES = frozenset({"ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g5.48xlarge", "ml.p3dn.24xlarge",
                           "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.trn1.32xlarge"})


def sagemaker_efa(rdma: str, row) -> bool:
    """Whether a job on the catalog's ``row`` gets the EFA presets at render: ``on`` wherever the
    type has EFA (or the catalog does not know it: checked in EC2 at submit); ``auto`` only where
    SageMaker itself treats the type as EFA (``SDK_EFA_TYPES``, or RDMA-read EFA)."""
    if rdma == "off":
        return False
    if row is None:
        return rdma == "on"
    if not efa_devices(rdma, row):
        return False
    return rdma == "on" or row.instance_type in SDK_EFA_TYPES or bool(row.efa_rdma_read)


def _at(request: Any, path: tuple) -> Any:
    for part in path:
        request = request[part]
    return request


def emulate(job: JobSpec, node_index: int, cluster: Cluster) -> Dict[str, str]:
    """SageMaker's node environment as its training toolkit exports it: the content of
    resourceconfig.json in ``SM_RESOURCE_CONFIG`` and the ``SM_*`` variables derived from it."""
    current = cluster.hosts[node_index]
    # SageMaker lists the hosts sorted lexicographically and ranks nodes in that order
    # (see detect.py); emulated nodes sharing one address keep their index as their rank.
    hosts = sorted(cluster.hosts)
    rank = hosts.index(current) if len(set(hosts)) == len(hosts) else node_index
    import warnings
    with warnings.catch_warnings():  # the render says them; emulating a node repeats nothing
        warnings.simplefilter("ignore")
        kind = SageMakerProvider.instance(job, SageMakerProvider.section_options(job)).instance_type
    config = {"current_host": current, "current_instance_type": kind, "current_group_name": "homogeneousCluster",
              "hosts": hosts}
    env = {
        "SM_RESOURCE_CONFIG": json.dumps(config),
        "SM_HOSTS": json.dumps(hosts),
        "SM_CURRENT_HOST": current,
        "SM_CURRENT_HOST_RANK": str(rank),
        "SM_HOST_COUNT": str(len(hosts)),
        "SM_CURRENT_INSTANCE_TYPE": kind,
        "SM_MASTER_ADDR": hosts[0],
        "SM_MASTER_PORT": str(cluster.master_port),
        "SM_NUM_GPUS": str(job.resources.gpus_per_node),
        "TRAINING_JOB_NAME": job.name,
    }
    if cluster.output_dir:
        env["SM_MODEL_DIR"] = cluster.output_dir
    return env
