"""The AWS providers' settings: ``providers.sagemaker`` (``SageMakerOptions``) and
``providers.ec2`` (``Ec2Options``), pydantic models a job file's section is read into."""
from __future__ import annotations

from typing import Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cloudtrain.spec.ports import MasterPort

# SSM's AWS-RunShellScript document: executionTimeout "Maximum is 172800 (48 hours)"
EC2_MAX_RUNTIME = 172800


class SageMakerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    @model_validator(mode="after")
    def _private_registry(self):
        # "Vpc: The training job pulls from a private Docker registry in your VPC" needs the job in
        # a VPC (VpcConfig: subnets), and credentials go with Vpc only (CreateTrainingJob,
        # TrainingImageConfig; SageMaker developer guide, "Use a private Docker registry for training")
        if self.image_access == "Vpc" and not self.subnets:
            raise ValueError("image_access: Vpc pulls the image through the job's VPC: set subnets and "
                             "security_group_ids")
        if self.image_credentials_lambda and self.image_access != "Vpc":
            raise ValueError("image_credentials_lambda is for a private registry: set image_access: Vpc")
        return self

    role_arn: Optional[str] = Field(None,
        description="IAM role the job runs as (needed to submit), e.g. arn:aws:iam::123456789012:role/train")
    output_s3: Optional[str] = Field(None,
        description="s3://bucket/prefix for the job's outputs: model.tar.gz holds what the job wrote to "
                    "CLOUDTRAIN_OUTPUT_DIR (needed to submit)")
    code_s3: Optional[str] = Field(None,
        description="s3://bucket/prefix for the code archives (default: <output_s3>/cloudtrain-code)")
    region: Optional[str] = Field(None,
        description="AWS region (default: boto3's: AWS_DEFAULT_REGION, the profile's region)")
    image: Optional[str] = Field(None, description="training image, e.g. an ECR URI (default: the job's image)")
    # botocore's model: AlgorithmSpecification.TrainingImageConfig.TrainingRepositoryAccessMode
    # (Platform | Vpc) and TrainingRepositoryAuthConfig.TrainingRepositoryCredentialsProviderArn
    # (a Lambda function's ARN, pattern arn:...:lambda:<region>:<12 digits>:function:...)
    image_access: Literal["Platform", "Vpc"] = Field("Platform", description=(
        "where SageMaker pulls the image: Platform (ECR) or Vpc (a private Docker registry reachable through "
        "the job's subnets; TrainingImageConfig.TrainingRepositoryAccessMode)"))
    image_credentials_lambda: Optional[str] = Field(None, pattern=r"^arn:[A-Za-z0-9-]+:lambda:[A-Za-z0-9-]+:[0-9]{12}:"
                                                    r"function:.+$", max_length=2048, description=(
        "with image_access: Vpc, the Lambda function that returns the private registry's credentials "
        "(TrainingRepositoryAuthConfig.TrainingRepositoryCredentialsProviderArn)"))
    instance_type: Optional[str] = Field(None,
        description="ml.* instance type (default: resolved from resources.accelerator x gpus_per_node or "
                    "resources.instance_type, see docs/resources.md; ml.m5.xlarge without GPUs)")
    volume_gb: int = Field(30, ge=1, le=16384, description="EBS volume per instance, GiB")
    max_runtime_seconds: int = Field(86400, ge=1, le=2419200,
        description="StoppingCondition.MaxRuntimeInSeconds: SageMaker stops the job after this")
    spot: bool = Field(False,
        description="managed spot training (EnableManagedSpotTraining); checkpoints default to "
                    "<output_s3>/<name>/<spec hash>/checkpoints")
    max_wait_seconds: Optional[int] = Field(None, ge=1, le=2419200,
        description="spot: MaxWaitTimeInSeconds, run time plus waiting for capacity (default: 2 x max_runtime_seconds)")
    checkpoint_s3: Optional[str] = Field(None,
        description="s3:// URI SageMaker syncs checkpoint_dir with (CheckpointConfig)")
    checkpoint_dir: str = Field("/opt/ml/checkpoints",
        description="checkpoint directory in the container (CLOUDTRAIN_CHECKPOINT_DIR)")
    inputs: Dict[str, str] = Field(default_factory=dict,
        description="input channels: name -> s3:// URI, downloaded to /opt/ml/input/data/<name>")
    subnets: List[str] = Field(default_factory=list, max_length=16,
        description="VpcConfig subnets (with security_group_ids)")
    security_group_ids: List[str] = Field(default_factory=list, max_length=5,
        description="VpcConfig security groups (with subnets)")
    network_isolation: bool = Field(False, description="EnableNetworkIsolation: the container has no network access")
    encrypt_inter_node_traffic: bool = Field(False, description="EnableInterContainerTrafficEncryption")
    # botocore's model (sagemaker service-2.json, ResourceConfig.KeepAlivePeriodInSeconds): min 0, max 21600
    keep_alive_seconds: Optional[int] = Field(None, ge=0, le=21600,
        description="warm pool: keep the instances this long after the job (KeepAlivePeriodInSeconds)")
    # For organisations (botocore's sagemaker model, CreateTrainingJob).  Their limits (KmsKeyId: at most
    # 2048 characters of [a-zA-Z0-9:/_-]; MaxPendingTimeInSeconds: 1800 .. 2419200; TrainingPlanArn: 50 ..
    # 2048 characters, arn:aws*:sagemaker:<region>:<12 digits>:training-plan/...) are checked against that
    # model itself (SageMakerProvider.check_limits), at the option's line.
    kms_key_id: Optional[str] = Field(None, description=(
        "KMS key (id, ARN or alias) that encrypts the job's outputs in S3 (OutputDataConfig.KmsKeyId)"))
    volume_kms_key_id: Optional[str] = Field(None, description=(
        "KMS key (id or ARN) that encrypts the instances' storage volumes (ResourceConfig.VolumeKmsKeyId); "
        "SageMaker refuses it on instance types with local NVMe storage, which it encrypts itself"))
    input_mode: Literal["File", "FastFile", "Pipe"] = Field("File", description=(
        "how the data inputs reach the nodes (Channel.InputMode): File (downloaded before the command), FastFile "
        "(streamed from S3 on read, at the same path), Pipe (a named pipe per epoch, /opt/ml/input/data/<name>_<n>)"))
    shard_inputs: List[str] = Field(default_factory=list, description=(
        "inputs whose objects are split across the nodes, each node getting 1/N of them "
        "(S3DataDistributionType: ShardedByS3Key; the others: FullyReplicated)"))
    max_pending_seconds: Optional[int] = Field(None, description=(
        "how long the job may wait for capacity before SageMaker stops it (StoppingCondition.MaxPendingTimeInSeconds, "
        "1800 .. 2419200)"))
    training_plan_arn: Optional[str] = Field(None, description=(
        "the SageMaker training plan (reserved capacity, e.g. p5) the job runs on (ResourceConfig.TrainingPlanArn)"))
    secrets_manager: Dict[str, str] = Field(default_factory=dict,
        description="where each of the job's secrets is read in the node: NAME -> Secrets Manager ARN or name (ARN#key"
                    " for a JSON key)")
    tags: Dict[str, str] = Field(default_factory=dict, description="extra tags of the training job")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    run_label: Optional[str] = Field(None,
        description="any label: changing it makes an otherwise identical job a new one (the spec hash changes)")


class Ec2Options(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    image_id: Optional[str] = Field(None,
        description="AMI with Python 3.8+, the job's framework and the SSM agent, e.g. an AWS Deep Learning AMI "
                    "(needed to submit)")
    instance_type: Optional[str] = Field(None,
        description="EC2 instance type (default: resolved from resources.accelerator x gpus_per_node or "
                    "resources.instance_type, see docs/resources.md; m5.xlarge without GPUs)")
    instance_profile: Optional[str] = Field(None,
        description="IAM instance profile (name or ARN) with AmazonSSMManagedInstanceCore (needed to submit)")
    code_s3: Optional[str] = Field(None,
        description="s3://bucket/prefix for the code archives; nodes fetch theirs with a presigned URL (needed to "
                    "submit)")
    region: Optional[str] = Field(None,
        description="AWS region (default: boto3's: AWS_DEFAULT_REGION, the profile's region)")
    subnet_id: Optional[str] = Field(None, description="subnet of every node (needed for EFA)")
    security_group_ids: List[str] = Field(default_factory=list,
        description="security groups; nodes must reach each other on every port (a self-referencing rule)")
    key_name: Optional[str] = Field(None, description="EC2 key pair for your own ssh access")
    placement_group: Optional[str] = Field(None, description="an existing placement group to launch into")
    create_placement_group: bool = Field(True,
        description="with more than one node and no placement_group: a cluster placement group for the job, "
                    "cloudtrain-<job id>")
    spot: bool = Field(False, description="spot instances (one-time requests)")
    root_volume_gb: Optional[int] = Field(None, ge=8, le=16384,
        description="size of the root volume (default: the AMI's)")
    root_device: str = Field("/dev/xvda",
        description="the AMI's root device name, with root_volume_gb (Ubuntu AMIs: /dev/sda1)")
    python: str = Field("python3", description="the AMI's Python, which runs `cloudtrain launch`")
    setup: List[str] = Field(default_factory=list,
        description="shell lines every node runs before the launcher, e.g. `. /opt/conda/etc/profile.d/conda.sh && "
                    "conda activate pytorch`")
    workdir: str = Field("/opt/cloudtrain",
        description="directory on each node for the job's code and outputs (<workdir>/<job id>)")
    master_port: MasterPort = Field(29500, description="the master's port (the next two are used too)")
    ssh_port: int = Field(22, ge=1, le=65535,
        description="mpi/horovod: the port node 0 reaches the others' sshd on; another than 22 starts an extra sshd "
                    "there")
    ifname: Optional[str] = Field(None,
        description="network interface for MPI and gloo (btl_tcp_if_include), e.g. ens5 (default: the one that routes "
                    "to node 0)")
    max_runtime_seconds: int = Field(86400, ge=60, le=EC2_MAX_RUNTIME,
        description="SSM executionTimeout of each node's script: SSM then SIGKILLs it; with terminate_when_done "
                    "the shutdown the script armed at its start terminates the instance 5 minutes later")
    ready_timeout_seconds: int = Field(900, ge=1,
        description="how long submit waits for the instances to run and register with SSM")
    terminate_when_done: bool = Field(True,
        description="each instance shuts down (and so terminates) a minute after its node ends, and at the "
                    "latest max_runtime plus 5 minutes after its script started (a backstop SSM's kill cannot undo)")
    code_url_expires_seconds: int = Field(3600, ge=60, le=604800, description="validity of the presigned code URL")
    log_group: Optional[str] = Field(None,
        description="CloudWatch Logs group for live output (SSM CloudWatchOutputConfig; the instance role needs "
                    "CloudWatch Logs permissions); default: SSM's output, available when a node ends")
    secrets_manager: Dict[str, str] = Field(default_factory=dict,
        description="where each of the job's secrets is read on the node: NAME -> Secrets Manager ARN or name (ARN#key"
                    " for a JSON key)")
    tags: Dict[str, str] = Field(default_factory=dict, description="extra tags of the instances")
    run_label: Optional[str] = Field(None,
        description="any label: changing it makes an otherwise identical job a new one (the spec hash changes)")
