"""The AWS providers' requests, built from (job, options) and nothing else: no SDK, no network,
no clock (``cloudtrain render`` prints them; ``schedule`` sends them).

- ``SageMakerRequest``: ``CreateTrainingJob``'s body, where the code archive goes, and what the
  nodes read from Secrets Manager; ``sagemaker_request`` builds it.
- ``Ec2Request``: ``RunInstances``, the placement group, each node's script (``ec2_node.sh``
  filled in), the ``SendCommand`` that carries it; ``ec2_request`` builds it.
- the helpers both use: S3 URIs, job names, secrets' ids and variable names as environment values.

Placeholders are ``cloudtrain.providers.request.Placeholder``'s (``<spec-hash>``, ``<code-digest>``),
filled in by ``cloudtrain.providers.request.fill`` at submit; ec2's node script also holds the values only
its instances tell (``Ec2Request.launch_values``), filled in the same way once they run.
"""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from cloudtrain.transfer import shipping, storage
from cloudtrain.catalogs.catalog import Instance
from cloudtrain.spec.errors import BadInput, JobFileError
from cloudtrain.catalogs.instances import Choice, choose, cpu_default
from cloudtrain.spec.job import JobSpec
from cloudtrain.launch import sshd
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.launch.unpack import BOOTSTRAP, bootstrap_argv
from cloudtrain.providers.request import Artifact, CodeUpload, Placeholder, Request, ShellText, fill

from .instances import EC2_RULES, EFA_ENV, SAGEMAKER_RULES, efa_devices, efa_env
from .options import Ec2Options, SageMakerOptions

SPEC_HASH, CODE_DIGEST = Placeholder.SPEC_HASH, Placeholder.CODE_DIGEST

NODE_MODULE = "cloudtrain_aws.node:main"  # shipped in the launcher bundle next to the detector
S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(/.*)?$")
TAG_JOB, TAG_NAME, TAG_HASH = "cloudtrain:job-id", "cloudtrain:name", "cloudtrain:spec-hash"



def parse_s3(uri: str) -> Tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``."""
    m = S3_URI.match(uri or "")
    if not m:
        raise BadInput(f"{uri!r} is not an s3://bucket/prefix URI; fix the option")
    return m.group(1), (m.group(2) or "").strip("/")


def join_s3(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])


def job_name(job: JobSpec, spec_hash: str) -> str:
    """``<name>-<12 hex>``: at most 63 characters, the same for the same spec."""
    return f"{job.name[:50].rstrip('-')}-{spec_hash[:12]}"


def check_secret_ids(job: JobSpec, provider: str, ids: Mapping[str, str]) -> None:
    unknown = sorted(set(ids) - set(job.secrets))
    if unknown:
        raise JobFileError.at(job, ("providers", provider, "secrets_manager"), f"{', '.join(unknown)} is not among "
                              "the job's secrets; map only names listed under `secrets`")


SECRET_IDS = "CLOUDTRAIN_SECRET_IDS"
# SageMaker takes environment values of at most 512 characters (botocore: TrainingEnvironmentValue):
# six Secrets Manager ARNs in one JSON object reached 600.
SECRET_IDS_MAX = 512


def secret_id_variables(ids: Mapping[str, str], limit: int = SECRET_IDS_MAX) -> Dict[str, str]:
    """The secrets' ids as environment variables for the node prelude (``cloudtrain_aws.node``):
    JSON objects ``{NAME: secret-id}`` of at most ``limit`` characters each, in
    ``CLOUDTRAIN_SECRET_IDS``, then ``CLOUDTRAIN_SECRET_IDS_1``, ``_2``, ... (an id too long on its
    own gets an object of its own, which the request's limits then name); {} without secrets."""
    chunks: List[Dict[str, str]] = []
    for name, ref in sorted(ids.items()):
        if chunks and len(json.dumps({**chunks[-1], name: ref})) <= limit:
            chunks[-1][name] = ref
        else:
            chunks.append({name: ref})
    return {SECRET_IDS + (f"_{i}" if i else ""): json.dumps(chunk) for i, chunk in enumerate(chunks)}


ENV_NAMES = "CLOUDTRAIN_ENV_NAMES"


def env_names_variables(names: Iterable[str], limit: int = SECRET_IDS_MAX) -> Dict[str, str]:
    """The job's variable names (which the launcher has mpirun forward), comma-separated in
    ``CLOUDTRAIN_ENV_NAMES`` and, past ``limit`` characters, continued in
    ``CLOUDTRAIN_ENV_NAMES_1``, ``_2``, ...: the node prelude joins them again before the launcher."""
    chunks: List[str] = [""]
    for name in sorted(names):
        if chunks[-1] and len(chunks[-1]) + 1 + len(name) > limit:
            chunks.append("")
        chunks[-1] = f"{chunks[-1]},{name}" if chunks[-1] else name
    return {ENV_NAMES + (f"_{i}" if i else ""): chunk for i, chunk in enumerate(chunks)}


def secret_reads(job: JobSpec, provider: str, ids: Mapping[str, str]) -> Optional[dict]:
    """What every node reads from Secrets Manager at start (``cloudtrain_aws.node``): the ids,
    and the values masked; None without secrets."""
    from cloudtrain.input.secrets import MASK
    if not job.secrets:
        return None
    return {
        name: {"SecretId": ids.get(name) or f"<providers.{provider}.secrets_manager.{name}>", "SecretString": MASK}
            for name in sorted(job.secrets)}


def require_secret_ids(job: JobSpec, provider: str, ids: Mapping[str, str]) -> None:
    """Submit-time: every secret must come from Secrets Manager (AWS has no secret variables)."""
    missing = sorted(set(job.secrets) - set(ids))
    if missing:
        raise JobFileError.at(
            job, ("providers", provider, "secrets_manager"),
            f"{provider} has no secret environment variables and cloudtrain never puts a secret's value "
            f"in the request; store {', '.join(missing)} in AWS Secrets Manager and map it: "
            f"providers.{provider}.secrets_manager: {{{missing[0]}: arn:aws:secretsmanager:...}}")


def strip_empty(request: dict) -> dict:
    """Drop keys whose value is None, an empty dict or an empty list (boto3 rejects None)."""
    return {k: v for k, v in request.items() if v is not None and v != {} and v != []}



def uses_ssh(job: JobSpec) -> bool:
    """Does node 0's mpirun/horovodrun reach the other nodes over ssh (their sshd)?"""
    return job.distribution.type in ("mpi", "horovod") and job.distribution.nodes > 1


# -- SageMaker ---------------------------------------------------------------------------------
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
# botocore's model, RetryStrategy: "The retry strategy to use when a training job fails due to an
# InternalServerError"; MaximumRetryAttempts: "When the job is retried, it's SecondaryStatus is
# changed to STARTING".  A failure of the job's own code is AlgorithmError, never retried.
RETRY_SAYS = ("SageMaker retries the job (RetryStrategy) only after an InternalServerError of its own; a "
              "failure of the job's code (a crash, out of memory, an NCCL timeout) ends it FAILED and is not "
              "restarted; SageMaker resumes an interrupted spot job by itself")
MAX_RUNTIME = 28 * 86400  # seconds: StoppingCondition.MaxRuntimeInSeconds and MaxWaitTimeInSeconds
# ml.m5.xlarge: 4 vCPUs, 16 GiB (aws.amazon.com/sagemaker/pricing, "Instance details"; EC2's m5.xlarge)
SAGEMAKER_CPU_DEFAULT = Instance("ml.m5.xlarge", vcpus=4, memory_gb=16)


@dataclass(frozen=True)
class SageMakerRequest(Request):
    """What a sagemaker submit sends: the code archive to ``upload`` (``s3/PutObject``'s
    ``put``), then ``create`` (``CreateTrainingJob``'s body; ``TrainingJobName`` holds
    ``<spec-hash>``, which names the job by its first 12 digits); ``efa_lookup``: an ml.* type the
    catalog does not know, whose EFA EC2 is asked about at submit (None: decided here)."""

    name: str  # the job's name (the artifact's)
    create: dict
    put: dict  # s3/PutObject: Bucket, Key (with <code-digest>), ContentType
    region: Optional[str] = None
    efa_lookup: Optional[str] = None
    secrets: Optional[dict] = None  # secretsmanager/GetSecretValue: what every node reads

    def artifacts(self) -> List[Artifact]:
        out = [Artifact("s3/PutObject", "code", self.put),
               Artifact("sagemaker/CreateTrainingJob", self.name, self.create)]
        return out + ([Artifact("secretsmanager/GetSecretValue", "node", self.secrets)] if self.secrets else [])

    @property
    def code_upload(self) -> CodeUpload:
        return CodeUpload(f"s3://{self.put['Bucket']}/{self.put['Key']}", region=self.region)


def sagemaker_instance(job: JobSpec, options: SageMakerOptions) -> Choice:
    """The ml.* instance type (from the catalog: resources.accelerator x gpus_per_node, or the
    named one, checked); ml.m5.xlarge for a job without GPUs."""
    return (choose(job, SAGEMAKER_RULES, options.instance_type)
            or cpu_default(job, SAGEMAKER_RULES, SAGEMAKER_CPU_DEFAULT))


def input_channels(job: JobSpec, options: SageMakerOptions) -> Dict[str, str]:
    """Channel name -> S3 URI: providers.sagemaker.inputs and the neutral storage.inputs."""
    return {**options.inputs, **job.storage.inputs}


def container_arguments(job: JobSpec, options: SageMakerOptions) -> List[str]:
    launch = shipping.launch_argv(job, platform="sagemaker", python=options.python)
    flags = ["--sshd"] if uses_ssh(job) else []
    # the node prelude: job id, Secrets Manager, sshd for mpirun; then the launcher
    return [options.python, "-m", NODE_MODULE.partition(":")[0], *flags, "--", *launch]


def sagemaker_environment(job: JobSpec, options: SageMakerOptions, detectors: str) -> Dict[str, str]:
    """The container's environment; ``detectors``: ``CLOUDTRAIN_DETECTORS`` (the node platform)."""
    env = dict(job.env)
    env.update({
        "CLOUDTRAIN_DETECTORS": detectors,
    })
    env.update(env_names_variables([*job.env, *job.secrets]))
    if sagemaker_checkpoint_s3(job, options):
        env["CLOUDTRAIN_CHECKPOINT_DIR"] = options.checkpoint_dir
    for name in job.storage.inputs:  # SageMaker downloads channel <name> here before the command
        env[storage.input_env(name)] = f"{INPUT_DATA_DIR}/{name}"
    if options.secrets_manager:
        env.update(secret_id_variables(options.secrets_manager))
    if job.distribution.type in ("mpi", "horovod"):
        env.setdefault("OMPI_MCA_plm_rsh_args", sshd.CLIENT_OPTIONS)
        if uses_ssh(job):  # the prelude's sshd forks before it listens: node 0 waits for it
            env[SSH_WAIT] = str(sshd.SSHD_PORT)
    row = sagemaker_instance(job, options).row
    if sagemaker_efa(job.network.rdma, row):
        for key, value in efa_env(row).items():
            env.setdefault(key, value)
    return env


def sagemaker_checkpoint_s3(job: JobSpec, options: SageMakerOptions) -> Optional[str]:
    if options.checkpoint_s3:
        return options.checkpoint_s3
    if options.spot:
        # per spec (its hash, filled at submit): a resubmitted spec resumes its own checkpoints, another
        # spec that shares the name never resumes from them
        return join_s3(options.output_s3 or OUTPUT_PLACEHOLDER, job.name, SPEC_HASH, "checkpoints")
    return None


def sagemaker_code_location(options: SageMakerOptions) -> str:
    base = options.code_s3 or join_s3(options.output_s3 or OUTPUT_PLACEHOLDER, "cloudtrain-code")
    return join_s3(base, CODE_DIGEST, "code.tar.gz")


def training_image_config(options: SageMakerOptions) -> Optional[dict]:
    """``AlgorithmSpecification.TrainingImageConfig`` for an image in a private registry reached
    through the job's VPC (botocore's sagemaker model: TrainingRepositoryAccessMode Platform|Vpc,
    TrainingRepositoryAuthConfig.TrainingRepositoryCredentialsProviderArn); None for ECR."""
    if options.image_access != "Vpc":
        return None
    config: Dict[str, object] = {"TrainingRepositoryAccessMode": "Vpc"}
    if options.image_credentials_lambda:
        config["TrainingRepositoryAuthConfig"] = {
            "TrainingRepositoryCredentialsProviderArn": options.image_credentials_lambda}
    return config


def create_training_job(job: JobSpec, options: SageMakerOptions, detectors: str) -> dict:
    """``CreateTrainingJob``'s body as boto3's ``create_training_job(**body)`` takes it."""
    code_uri = sagemaker_code_location(options)
    channels = [{"ChannelName": CODE_CHANNEL, "InputMode": "File", "CompressionType": "None",
                 "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": code_uri,
                                                 "S3DataDistributionType": "FullyReplicated"}}}]
    for name, uri in sorted(input_channels(job, options).items()):
        # the code channel stays File (the boot line reads its archive); the data channels take input_mode
        # (Channel.InputMode overrides AlgorithmSpecification.TrainingInputMode, botocore's model)
        sharded = "ShardedByS3Key" if name in options.shard_inputs else "FullyReplicated"
        channels.append({"ChannelName": name, "InputMode": options.input_mode,
                         "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                                         "S3DataDistributionType": sharded}}})
    resources = {"InstanceType": sagemaker_instance(job, options).instance_type,
                 "InstanceCount": job.distribution.nodes,
                 "VolumeSizeInGB": options.volume_gb,
                 "VolumeKmsKeyId": options.volume_kms_key_id,
                 "TrainingPlanArn": options.training_plan_arn}
    if options.keep_alive_seconds is not None:
        resources["KeepAlivePeriodInSeconds"] = options.keep_alive_seconds
    stopping = {"MaxRuntimeInSeconds": options.max_runtime_seconds,
                "MaxPendingTimeInSeconds": options.max_pending_seconds}
    if options.spot:
        stopping["MaxWaitTimeInSeconds"] = options.max_wait_seconds or min(2 * options.max_runtime_seconds, MAX_RUNTIME)
    checkpoint = sagemaker_checkpoint_s3(job, options)
    tags = [{"Key": TAG_NAME, "Value": job.name}, {"Key": TAG_HASH, "Value": SPEC_HASH}]
    tags += [{"Key": k, "Value": v} for k, v in sorted(options.tags.items())]
    if options.run_label:
        tags.append({"Key": "cloudtrain:run-label", "Value": options.run_label})
    algorithm = {
        "TrainingImage": options.image or job.image,
        "TrainingInputMode": "File",
        "ContainerEntrypoint": ["/bin/sh", "-c", BOOT, "cloudtrain", BOOTSTRAP, CODE_DIGEST],
        "ContainerArguments": container_arguments(job, options),
        "TrainingImageConfig": training_image_config(options),
    }
    return strip_empty({
        "TrainingJobName": f"{job.name[:50].rstrip('-')}-{SPEC_HASH}",
        "RoleArn": options.role_arn or ROLE_PLACEHOLDER,
        "AlgorithmSpecification": strip_empty(algorithm),
        "InputDataConfig": channels,
        "OutputDataConfig": strip_empty({"S3OutputPath": options.output_s3 or OUTPUT_PLACEHOLDER,
                                         "KmsKeyId": options.kms_key_id}),
        "ResourceConfig": strip_empty(resources),
        "StoppingCondition": strip_empty(stopping),
        "Environment": sagemaker_environment(job, options, detectors),
        "RetryStrategy": {"MaximumRetryAttempts": job.max_restarts} if job.max_restarts else None,
        "CheckpointConfig": {"S3Uri": checkpoint, "LocalPath": options.checkpoint_dir} if checkpoint else None,
        "VpcConfig": {"SecurityGroupIds": list(options.security_group_ids), "Subnets": list(options.subnets)}
        if options.subnets else None,
        "EnableNetworkIsolation": options.network_isolation or None,
        "EnableInterContainerTrafficEncryption": options.encrypt_inter_node_traffic or None,
        "EnableManagedSpotTraining": options.spot or None,
        "Tags": tags,
    })


def sagemaker_request(job: JobSpec, options: SageMakerOptions, detectors: str) -> SageMakerRequest:
    if options.code_s3 or options.output_s3:
        bucket, key = parse_s3(sagemaker_code_location(options))
    else:
        bucket, key = "<providers.sagemaker.output_s3>", f"cloudtrain-code/{CODE_DIGEST}/code.tar.gz"
    row = sagemaker_instance(job, options).row
    # a type the catalog knows had its EFA presets decided here; a newer one is looked up in EC2 at submit
    lookup = sagemaker_instance(job, options).instance_type if row is None and job.network.rdma != "off" else None
    return SageMakerRequest(name=job.name, create=create_training_job(job, options, detectors),
                            put={"Bucket": bucket, "Key": key, "ContentType": "application/gzip"},
                            region=options.region, efa_lookup=lookup,
                            secrets=secret_reads(job, "sagemaker", options.secrets_manager))


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




# -- EC2 ---------------------------------------------------------------------------------------
# Filled in at submit, once the values are known (``cloudtrain.providers.request.fill``): the job's id when
# its name is made from the spec hash; the rest once its instances run (``Ec2Request.launch_values``).
JOB_ID = "<job-id>"
MASTER_IP = "<master-ip>"
NODE_IPS = "<node-ips>"
HOSTS_LINES = "<hosts-lines>"
PRESIGNED_CODE_URL = "<presigned-code-url>"  # the code archive's object, readable without S3 permission
SSH_KEY = "<ssh-public-key>"
INSTANCE_ID = "<instance-id>"
INSTANCE_IDS = "<instance-ids>"  # the job's instances, node 0 first, comma-separated
NODE_SCRIPT = "<node-script>"
FIRST_NODE, LAST_NODE = "<first>", "<last>"  # the nodes one SendCommand goes to
EFA_MARK = "# <efa-env>: filled in at submit: EFA presets if EC2 says the instance type has EFA (network.rdma: auto)"
SSM_TARGETS = 50  # SendCommand's most InstanceIds
TAG_OUTPUT = "cloudtrain:output"  # storage.output: where `cloudtrain outputs` finds the job's output
TAG_LOGS = "cloudtrain:log-group"
IMAGE_PLACEHOLDER = "<providers.ec2.image_id>"
PROFILE_PLACEHOLDER = "<providers.ec2.instance_profile>"
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS")
# the backstop shutdown (backstop_lines) fires this long after max_runtime: SSM starts the executionTimeout
# clock before the script's first line runs and the minutes are rounded up, so a script still inside its
# executionTimeout is never shut down under itself; after it, the agent has killed the script anyway
BACKSTOP_GRACE_MINUTES = 5
CHECKPOINT_SYNC_SECONDS = 60  # how often a node copies its checkpoint directory to storage.checkpoint
# ``python3 -c FETCH URL FILE``: the presigned URL's object to FILE, in chunks (then unpack.BOOTSTRAP
# checks its sha256 and unpacks it: the node needs no S3 permission, and no cloudtrain installed).
FETCH = ("import shutil,sys,urllib.request as u\n"
         "with u.urlopen(sys.argv[1], timeout=900) as r, open(sys.argv[2], 'wb') as f: "
         "shutil.copyfileobj(r, f, 1 << 20)")
# The node script's template: ``@word@`` is one shell word (filled shell-quoted: ``ShellText``),
# a line ``#@ block`` the lines a job's settings make (or none).  It passes shellcheck as it is.
NODE_TEMPLATE = "ec2_node.sh"
EC2_CPU_DEFAULT = Instance("m5.xlarge", vcpus=4, memory_gb=16)  # EC2 User Guide, general purpose: 4 vCPUs, 16 GiB


@dataclass(frozen=True)
class Ec2Request(Request):
    """What an ec2 submit sends, in order: the code archive (``put``), the job's placement group,
    ``RunInstances``, node 0's ssh key (``keygen``, mpi/horovod over ssh), each node's script
    through ``send_command`` (one per ``SSM_TARGETS`` nodes).  ``JOB_ID`` stands for the job's
    name (made from the spec hash at submit).  ``efa_lookup``: an instance type the catalog does
    not know, whose EFA EC2 is asked about at submit (``with_efa`` then gives the interfaces;
    ``efa_exports`` the script's EFA line with ``network.rdma: auto``)."""

    put: dict  # s3/PutObject: Bucket, Key (with <code-digest>), ContentType
    run_instances: dict
    node_script: str  # ec2_node.sh filled in; JOB_ID and the launch values left for submit
    send_command: dict  # SendCommand with NODE_SCRIPT, FIRST_NODE and LAST_NODE in it
    placement_group: Optional[dict] = None  # CreatePlacementGroup, when the job makes its own
    keygen: Optional[str] = None
    region: Optional[str] = None
    instance_type: str = ""
    subnet_id: Optional[str] = None
    security_group_ids: Tuple[str, ...] = ()
    efa_lookup: Optional[str] = None
    efa_exports: Optional[str] = None  # the line for EFA_MARK when EC2 says the type has EFA
    secrets: Optional[dict] = None  # secretsmanager/GetSecretValue: what every node reads

    def artifacts(self) -> List[Artifact]:
        out = [Artifact("s3/PutObject", "code", self.put)]
        if self.placement_group:
            out.append(Artifact("ec2/CreatePlacementGroup", self.placement_group["GroupName"], self.placement_group))
        out.append(Artifact("ec2/RunInstances", JOB_ID, self.run_instances))
        if self.keygen is not None:
            out.append(Artifact("shell/script", "ssh-key", {"node": 0, "shell": "/bin/sh", "script": self.keygen}))
        out.append(Artifact("shell/script", "nodes", {"shell": "/bin/sh", "script": self.node_script}))
        out.append(Artifact("ssm/SendCommand", f"per {SSM_TARGETS} nodes", self.send_command))
        return out + ([Artifact("secretsmanager/GetSecretValue", "node", self.secrets)] if self.secrets else [])

    @property
    def code_upload(self) -> CodeUpload:
        return CodeUpload(f"s3://{self.put['Bucket']}/{self.put['Key']}", region=self.region)

    def with_efa(self, count: int) -> dict:
        """``RunInstances`` with ``count`` EFA interfaces per node (EC2 told the count at submit),
        where the subnet for them is set."""
        request = dict(self.run_instances)
        if "NetworkInterfaces" in request or self.subnet_id:
            request["NetworkInterfaces"] = efa_interfaces(self.subnet_id, self.security_group_ids, count)
            request.pop("SubnetId", None)
            request.pop("SecurityGroupIds", None)
        return request

    def launch_values(self, ips: List[str], ids: List[str], url: str, ssh_key: Optional[str],
                      efa: Optional[bool]) -> Dict[str, str]:
        """The script's values its running instances tell (node 0 first): addresses, instance ids,
        the presigned code URL, node 0's public key; ``efa``: what EC2 said (None: not asked)."""
        name = self.run_instances["ClientToken"]
        values = {MASTER_IP: ips[0], NODE_IPS: ",".join(ips), PRESIGNED_CODE_URL: url, INSTANCE_IDS: ",".join(ids),
                  HOSTS_LINES: "\n".join(f"{ip} ct-node-{i}  # cloudtrain {name}" for i, ip in enumerate(ips))}
        if self.efa_exports is not None:
            values[EFA_MARK] = (self.efa_exports if efa else f"# no EFA: EC2 says {self.instance_type} has none "
                                                             "(or no subnet_id)")
        if ssh_key is not None:
            values[SSH_KEY] = ssh_key
        return values


def ec2_instance(job: JobSpec, options: Ec2Options) -> Choice:
    """The instance type (from the catalog: resources.accelerator x gpus_per_node, or the named
    one, checked); m5.xlarge for a job without GPUs."""
    return choose(job, EC2_RULES, options.instance_type) or cpu_default(job, EC2_RULES, EC2_CPU_DEFAULT)


def efa_count(job: JobSpec, options: Ec2Options) -> int:
    """EFA interfaces per node known at render: the catalog row's devices when RDMA applies
    (``on``, or ``auto`` with a subnet for them); 0 when unknown until submit."""
    if job.network.rdma == "auto" and not options.subnet_id:
        return 0
    return efa_devices(job.network.rdma, ec2_instance(job, options).row)


def placement_group(job: JobSpec, options: Ec2Options) -> Optional[str]:
    if options.placement_group:
        return options.placement_group
    if options.create_placement_group and job.distribution.nodes > 1:
        return f"cloudtrain-{JOB_ID}"
    return None


def ec2_tags(job: JobSpec, options: Ec2Options) -> List[dict]:
    tags = [{"Key": TAG_JOB, "Value": JOB_ID}, {"Key": TAG_NAME, "Value": job.name},
            {"Key": TAG_HASH, "Value": SPEC_HASH}, {"Key": "Name", "Value": JOB_ID}]
    if options.log_group:
        tags.append({"Key": TAG_LOGS, "Value": options.log_group})
    if job.storage.output:
        tags.append({"Key": TAG_OUTPUT, "Value": job.storage.output})
    if options.run_label:
        tags.append({"Key": "cloudtrain:run-label", "Value": options.run_label})
    return tags + [{"Key": k, "Value": v} for k, v in sorted(options.tags.items())]


def efa_interfaces(subnet_id: Optional[str], security_group_ids: Iterable[str], count: int) -> List[dict]:
    """The interfaces of a node with ``count`` EFA devices (one per network card).

    One card: one EFA-with-ENA interface (``efa``), the node's address.  More cards: as AWS
    recommends for instances with several network cards ("Maximize network bandwidth on Amazon
    EC2 instances with multiple network cards", EC2 User Guide, efa-acc-inst-types; the P5
    example there has 32 EFA devices and one ENA device): the primary interface is ENA
    (``interface``, card 0, device 0: an EFA-only interface cannot be primary), an ``efa-only``
    interface on card 0 device 1, and an ``efa-only`` interface at device 0 of every other card.
    EFA-only interfaces take no IP address, so a p5.48xlarge holds one address of the subnet, not
    32, and the node has one IP interface: NCCL's and Gloo's bootstrap sockets cannot pick a
    wrong one, and no NCCL_SOCKET_IFNAME is needed."""
    groups = list(security_group_ids)

    def one(card: int, device: int, kind: str) -> dict:
        return strip_empty({"DeviceIndex": device, "NetworkCardIndex": card, "InterfaceType": kind,
                            "SubnetId": subnet_id or "<providers.ec2.subnet_id>",
                            "Groups": list(groups), "DeleteOnTermination": True})
    if count <= 1:
        return [one(0, 0, "efa")]
    return [one(0, 0, "interface"), one(0, 1, "efa-only"), *(one(card, 0, "efa-only") for card in range(1, count))]


def run_instances(job: JobSpec, options: Ec2Options) -> dict:
    """``RunInstances`` as boto3's ``run_instances(**request)`` takes it."""
    n = job.distribution.nodes
    profile = options.instance_profile or PROFILE_PLACEHOLDER
    group = placement_group(job, options)
    request = {
        "ImageId": options.image_id or IMAGE_PLACEHOLDER,
        "InstanceType": ec2_instance(job, options).instance_type,
        "MinCount": n, "MaxCount": n,  # all or nothing: a distributed job needs every node
        "ClientToken": JOB_ID,  # idempotent: a retried RunInstances returns the first reservation
        "IamInstanceProfile": {"Arn": profile} if profile.startswith("arn:") else {"Name": profile},
        "KeyName": options.key_name,
        "Placement": {"GroupName": group} if group else None,
        # a shutdown from the instance (node_end's, the backstop's) terminates it: billing ends (botocore's
        # ec2 model, RunInstancesRequest.InstanceInitiatedShutdownBehavior, ShutdownBehavior: stop|terminate)
        "InstanceInitiatedShutdownBehavior": "terminate" if options.terminate_when_done else None,
        "InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}
        if options.spot else None,
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        "BlockDeviceMappings": [{"DeviceName": options.root_device,
                                 "Ebs": {"VolumeSize": options.root_volume_gb, "VolumeType": "gp3",
                                         "DeleteOnTermination": True}}] if options.root_volume_gb else None,
        "TagSpecifications": [{"ResourceType": "instance", "Tags": ec2_tags(job, options)},
                              {"ResourceType": "volume", "Tags": ec2_tags(job, options)}],
    }
    known = efa_count(job, options)
    if known or job.network.rdma == "on":
        request["NetworkInterfaces"] = efa_interfaces(options.subnet_id, options.security_group_ids, known or 1)
    else:
        request["SubnetId"] = options.subnet_id
        request["SecurityGroupIds"] = list(options.security_group_ids)
    return strip_empty(request)



def copy_command(options: Ec2Options) -> str:
    """``cloudtrain_aws.node copy`` from the job's code (boto3 on the AMI, the instance profile's rights)."""
    return (f'PYTHONPATH="$WORK/code/.cloudtrain${{PYTHONPATH:+:$PYTHONPATH}}" {shlex.quote(options.python)} '
            f'-m {NODE_MODULE.partition(":")[0]} copy')

def inputs_copy(job: JobSpec, options: Ec2Options) -> List[str]:
    """storage.inputs on EC2: each s3:// input copied to ``$WORK/input/<name>`` before the
    launcher (a stopped copy stops the node: ``set -e``), seen as CLOUDTRAIN_INPUT_<NAME>."""
    if not job.storage.inputs:
        return []
    lines = ["# storage.inputs: copied from S3 with the instance profile's rights (boto3 on the AMI)"]
    for name, uri in sorted(job.storage.inputs.items()):
        variable = storage.input_env(name)
        lines += [f"STEP={shlex.quote(f'copying storage.inputs.{name} from {uri}')}",
                  f'export {variable}="$WORK/input/{name}"',  # name: [a-z][a-z0-9_]* (job.Storage)
                  f'{copy_command(options)} {shlex.quote(uri)} "${variable}"']
    return lines

def output_copy(job: JobSpec, options: Ec2Options) -> List[str]:
    """storage.output on EC2: when the launcher has ended, every node's CLOUDTRAIN_OUTPUT_DIR
    goes to ``<storage.output>/<job id>/`` (one prefix, as a directory the nodes share would
    be); an upload that fails fails a node that succeeded."""
    if not job.storage.output:
        return []
    target = join_s3(job.storage.output, JOB_ID)
    return ["# storage.output: this node's output directory to S3",
            f'[ "$code" -ne 0 ] || STEP={shlex.quote(f"copying its output to {target}")}',
            f'{copy_command(options)} "$CLOUDTRAIN_OUTPUT_DIR" {shlex.quote(target)} || '
            f'{{ echo "[cloudtrain] node $NODE: "{shlex.quote(f"its output did not reach {target}")} >&2; '
            '[ "$code" -ne 0 ] || code=3; }']

def checkpoint_sync(job: JobSpec) -> List[str]:
    """storage.checkpoint on EC2: the node script copies it down before the launcher, up every
    minute while the job runs and once more at the end (AWS CLI on the AMI, S3 rights in
    the instance profile); nodes see the local copy as CLOUDTRAIN_CHECKPOINT_DIR."""
    uri = job.storage.checkpoint
    if not uri:
        return []
    q = shlex.quote(uri)
    return [
        "# storage.checkpoint: the last attempt's checkpoints down from S3, this one's up while it runs",
        f"STEP={shlex.quote(f'downloading the checkpoint from {uri}')}",
        'command -v aws >/dev/null || '
        '{ echo "[cloudtrain] storage.checkpoint needs the AWS CLI on the AMI" >&2; exit 2; }',
        'export CLOUDTRAIN_CHECKPOINT_DIR="$WORK/checkpoint"',
        'mkdir -p "$CLOUDTRAIN_CHECKPOINT_DIR"',
        f'aws s3 sync --only-show-errors {q} "$CLOUDTRAIN_CHECKPOINT_DIR"',
        f'ckpt_up() {{ aws s3 sync --only-show-errors "$CLOUDTRAIN_CHECKPOINT_DIR" {q}; }}',
        # No signal: a TERM could reach a background sleep forked but not yet exec'd (dash's trap
        # still installed there swallows it) or land before `s=$!`; that sleep then outlived the
        # script and held SSM's output open.  The loop runs only foreground commands and looks for
        # its stop file every second, so once ckpt_stop's wait returns, nothing it started is left.
        "# up every minute until ckpt_stop, which returns once the loop (and anything it ran) has ended",
        'CKPT_STOP="$WORK/checkpoint.stop"',
        'rm -f "$CKPT_STOP"',
        f'( n=0; while [ ! -e "$CKPT_STOP" ]; do sleep 1; n=$((n + 1)); '
        f'if [ "$n" -ge {CHECKPOINT_SYNC_SECONDS} ]; then n=0; ckpt_up || true; fi; done ) &',
        "SYNC=$!",
        'ckpt_stop() { touch "$CKPT_STOP"; wait "$SYNC" 2>/dev/null || true; SYNC=; }',
    ]

def keygen_script() -> str:
    """Node 0's script that makes the job's ssh key and prints its public half."""
    return ("set -eu\ninstall -d -m 700 /root/.ssh\n"
            f"k=/root/.ssh/cloudtrain-{JOB_ID}\n"
            f"[ -f \"$k\" ] || ssh-keygen -q -t ed25519 -N '' -C 'cloudtrain {JOB_ID}' -f \"$k\"\n"
            'cat "$k.pub"\n')

def send_command(options: Ec2Options, comment: str, script: str) -> dict:
    """``SendCommand``: ``script`` on every node at once (``InstanceIds`` set at submit)."""
    request = {
        "DocumentName": "AWS-RunShellScript",
        "InstanceIds": [INSTANCE_ID],
        "Comment": comment[:100],
        "MaxConcurrency": "100%",  # every node at once: SSM's default (50) would leave some waiting
        "TimeoutSeconds": max(30, options.ready_timeout_seconds),
        # at executionTimeout the SSM agent SIGKILLs the script's process group (amazon-ssm-agent
        # agent/executers/executers_unix.go killProcess, exit 137): the script's EXIT trap never runs; the
        # shutdown it armed first (backstop_lines) ends the instance BACKSTOP_GRACE_MINUTES later
        "Parameters": {"commands": [script], "executionTimeout": [str(options.max_runtime_seconds)]},
    }
    if options.log_group:
        request["CloudWatchOutputConfig"] = {"CloudWatchOutputEnabled": True,
                                             "CloudWatchLogGroupName": options.log_group}
    return request


def ec2_code_location(options: Ec2Options) -> Tuple[str, str]:
    """The code archive's bucket and key."""
    if options.code_s3:
        return parse_s3(join_s3(options.code_s3, CODE_DIGEST, "code.tar.gz"))
    return "<providers.ec2.code_s3>", f"{CODE_DIGEST}/code.tar.gz"


def node_script(job: JobSpec, options: Ec2Options) -> str:
    """Every node's launch script (POSIX sh, run as root by SSM's AWS-RunShellScript): the
    template ``ec2_node.sh`` with the job's values (each one shell word, quoted by ``fill``) and
    the lines its settings make; a node finds its rank from the instance id SSM's agent gives it."""
    from pathlib import Path
    words = {"@nodes@": str(job.distribution.nodes), "@name@": job.name, "@workdir@": options.workdir,
             "@python@": options.python, "@fetch@": FETCH}
    for option in ("workdir", "python"):  # fill replaces one slot after another: none may hold a slot
        slot = next((w for w in words if w in getattr(options, option)), None)
        if slot:
            raise JobFileError.at(job, ("providers", "ec2", option), f"holds {slot}, a slot of the node script's "
                                  "template (cloudtrain_aws/ec2_node.sh); write it otherwise")
    text = fill(ShellText(Path(__file__).with_name(NODE_TEMPLATE).read_text()), words)
    blocks = {f"#@ {name}\n": "".join(line + "\n" for line in lines)
              for name, lines in node_blocks(job, options).items()}
    return fill(str(text), blocks)


def node_blocks(job: JobSpec, options: Ec2Options) -> Dict[str, List[str]]:
    """The lines of each ``#@ block`` of the node script: what the job's settings make."""
    n = job.distribution.nodes
    q = shlex.quote
    blocks: Dict[str, List[str]] = {
        "shutdown": ["  shutdown -h +1 'cloudtrain: the job ended' >/dev/null 2>&1 || true"]
        if options.terminate_when_done else [],
        "backstop": backstop_lines(options) if options.terminate_when_done else [],
        "unpack": ["  " + shlex.join(bootstrap_argv(options.python, CODE_DIGEST, "code.tar.gz", "code.part"))],
        # the AMI's /dev/shm: a tmpfs the kernel sizes at half the memory (tmpfs(5))
        "shm": ["STEP='sizing /dev/shm'", f"mount -o remount,size={int(job.resources.shm_gb * 1024)}m /dev/shm"]
        if job.resources.shm_gb else [],
        "ssh": ssh_lines(options) if uses_ssh(job) else [],
        "setup": ["# providers.ec2.setup", "STEP='running providers.ec2.setup'", *options.setup]
        if options.setup else [],
    }
    env = dict(job.env)
    if job.distribution.type in ("mpi", "horovod"):
        for name in THREAD_VARS:  # one thread per rank unless the job says otherwise (AWS's EC2 multi-node blog)
            env.setdefault(name, "1")
    env.update({
        "CLOUDTRAIN_PLATFORM": "ec2", "CLOUDTRAIN_NUM_NODES": str(n),
        "CLOUDTRAIN_MASTER_ADDR": MASTER_IP, "CLOUDTRAIN_MASTER_PORT": str(options.master_port),
        "CLOUDTRAIN_HOSTS": NODE_IPS, "CLOUDTRAIN_NPROC_PER_NODE": str(job.procs_per_node),
        "CLOUDTRAIN_JOB_ID": JOB_ID, "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
    })
    if options.ifname:
        env["CLOUDTRAIN_IFNAME"] = options.ifname
    if options.secrets_manager:
        env.update(secret_id_variables(options.secrets_manager))
    row = ec2_instance(job, options).row
    if efa_count(job, options) or (job.network.rdma == "on" and row is None):
        env.update({k: v for k, v in efa_env(row).items() if k not in job.env})
    blocks["env"] = [f"export {k}={q(v)}" for k, v in env.items()]
    blocks["inputs"] = inputs_copy(job, options)
    blocks["checkpoint"] = checkpoint_sync(job)
    # a type newer than the catalog: EC2 is asked at submit
    blocks["efa"] = [EFA_MARK] if job.network.rdma == "auto" and row is None else []
    launch = [options.python, "-m", NODE_MODULE.partition(":")[0], "--",
              *shipping.launch_argv(job, python=options.python)]
    blocks["launch"] = ["PYTHONPATH=.cloudtrain${PYTHONPATH:+:$PYTHONPATH} " + shlex.join(launch)]
    blocks["checkpoint-end"] = ["ckpt_stop", "ckpt_up || true"] if job.storage.checkpoint else []
    blocks["output"] = output_copy(job, options)
    return blocks


def backstop_minutes(options: Ec2Options) -> int:
    """Minutes from the script's start to the backstop shutdown: max_runtime, rounded up to a whole
    minute (shutdown(8) takes "+m" minutes), plus ``BACKSTOP_GRACE_MINUTES``."""
    return -(-options.max_runtime_seconds // 60) + BACKSTOP_GRACE_MINUTES


def backstop_lines(options: Ec2Options) -> List[str]:
    """The node script's first step: a shutdown scheduled for max_runtime plus a grace period, which
    the SSM agent's SIGKILL of the script's process group at executionTimeout cannot undo.  systemd's
    shutdown(8) hands "+m" to systemd-logind (systemctl(1) --when=: the shutdown is scheduled by
    logind) and returns, so the pending shutdown belongs to no process of the script's group; only
    ``shutdown -c`` or a later schedule replaces it (node_end's ``shutdown -h +1``, sooner, does).  With
    ``InstanceInitiatedShutdownBehavior: terminate`` the shutdown terminates the instance: billing ends.
    A node that cannot arm it fails here, before anything of the job runs."""
    minutes = backstop_minutes(options)
    return ["STEP='arming the shutdown backstop'",
            f"shutdown -h {shlex.quote(f'+{minutes}')} "
            f"{shlex.quote(f'cloudtrain: max_runtime plus {BACKSTOP_GRACE_MINUTES} minutes reached')} >/dev/null"]


def ssh_lines(options: Ec2Options) -> List[str]:
    """mpi/horovod over ssh: node 0's mpirun reaches the other nodes with the job's own key."""
    port = options.ssh_port
    lines = [
        "# mpirun on node 0 reaches the other nodes over ssh with the job's own key",
        "STEP='setting up ssh'",
        "install -d -m 700 /root/.ssh && touch /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys",
        f"grep -qF '{SSH_KEY}' /root/.ssh/authorized_keys || echo '{SSH_KEY}' >>/root/.ssh/authorized_keys",
        'if ! grep -q "cloudtrain $JOB" /root/.ssh/config 2>/dev/null; then',
        "cat >>/root/.ssh/config <<CLOUDTRAIN_SSH",
        "# cloudtrain $JOB",
        f"Host ct-node-* $(echo '{NODE_IPS}' | tr , ' ')",
        "  User root",
        f"  Port {port}",
        "  IdentityFile /root/.ssh/cloudtrain-$JOB",
        "  StrictHostKeyChecking no",
        "  UserKnownHostsFile /dev/null",
        "CLOUDTRAIN_SSH",
        "chmod 600 /root/.ssh/config",
        "fi",
    ]
    if port != 22:  # keep off port 22 when asked (AWS's EC2 multi-node blog: a host-network container may own it)
        lines += [f"if ! (ss -ltn 2>/dev/null | grep -q ':{port} '); then mkdir -p /run/sshd && "
                  f"/usr/sbin/sshd -p {port}; fi"]
    lines += [f"export OMPI_MCA_plm_rsh_args='-p {port} -i /root/.ssh/cloudtrain-{JOB_ID} "
              "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"]
    # node 0 waits until every node's sshd accepts: one started above forks before it listens
    return lines + [f"export {SSH_WAIT}={port}"]


def ec2_request(job: JobSpec, options: Ec2Options) -> Ec2Request:
    bucket, key = ec2_code_location(options)
    group = placement_group(job, options)
    own_group = {"GroupName": group, "Strategy": "cluster",
                 "TagSpecifications": [{"ResourceType": "placement-group", "Tags": ec2_tags(job, options)}]} \
        if group and not options.placement_group else None
    row = ec2_instance(job, options).row
    kind = ec2_instance(job, options).instance_type
    exports = ("export " + " ".join(f"{k}={v}" for k, v in EFA_ENV.items() if k not in job.env)
               if job.network.rdma == "auto" and row is None else None)
    return Ec2Request(
        put={"Bucket": bucket, "Key": key, "ContentType": "application/gzip"},
        run_instances=run_instances(job, options), node_script=node_script(job, options),
        send_command=send_command(options, f"cloudtrain {JOB_ID} nodes {FIRST_NODE}-{LAST_NODE}", NODE_SCRIPT),
        placement_group=own_group, keygen=keygen_script() if uses_ssh(job) else None, region=options.region,
        instance_type=kind, subnet_id=options.subnet_id, security_group_ids=tuple(options.security_group_ids),
        efa_lookup=kind if row is None and job.network.rdma != "off" else None, efa_exports=exports,
        secrets=secret_reads(job, "ec2", options.secrets_manager))
