"""``ec2``: plain EC2 instances, one per node, run through AWS Systems Manager (SSM).

Rendering gives the ``RunInstances`` request (N instances, a cluster placement group, EFA
interfaces when RDMA applies, the job's tags), the code upload, and each node's launch script
(``shell/script``, one for every node): host names, the job's code fetched from S3, the node's
rank (its instance id's place in the job's instance list; SSM's agent sets ``AWS_SSM_INSTANCE_ID``),
``cloudtrain launch``; for mpi/horovod, ssh from node 0 to the others as AWS's blog on multi-node training on EC2 advises (``-x``
forwarding and ``btl_tcp_if_include`` come from the launcher; thread variables default to 1;
a non-default ssh port when asked).  Submitting starts the instances, waits until SSM sees
them, then sends the script with one ``SendCommand`` per 50 nodes (SSM's limit), all nodes at once.  Status comes from the command
invocations and the instances' states, logs from SSM's output (or CloudWatch Logs), and
``cancel`` terminates only instances tagged with the job's id.  The lifecycle is
``CloudProvider``'s: this module gives the EC2 and SSM calls.
"""
from __future__ import annotations

import json
import re
import shlex
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain import shipping, storage
from cloudtrain.cloud import timestamp
from cloudtrain.errors import BadInput, CloudtrainWarning, JobNotFound, PlatformError
from cloudtrain.catalog import Instance
from cloudtrain.instances import Choice, choose, cpu_default
from cloudtrain.job import JobSpec
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.launch.unpack import bootstrap_argv
from cloudtrain.provider import Artifact, JobStatus, Rendered, State
from cloudtrain.survival import at_most, checkpoint_uri, with_neutral

from .common import (EFA_ENV, NODE_MODULE, SPEC_HASH, CODE_DIGEST, TAG_HASH, TAG_JOB, TAG_NAME, AwsProvider,
                     check_secret_ids, secret_id_variables, secrets_artifact, fill, job_name, join_s3, parse_s3, strip_empty)
from .instances import EC2_RULES, efa_devices, efa_env

JOB_ID = "<job-id>"
MASTER_IP = "<master-ip>"
NODE_IPS = "<node-ips>"
HOSTS_LINES = "<hosts-lines>"
CODE_URL = "<code-url>"
SSH_KEY = "<ssh-public-key>"
INSTANCE_ID = "<instance-id>"
INSTANCE_IDS = "<instance-ids>"  # the job's instances, node 0 first, comma-separated
SSM_TARGETS = 50  # SendCommand's most InstanceIds
NODE_SCRIPT = "<node-script>"
EFA_MARK = "# <efa-env>: filled in at submit: EFA presets if EC2 says the instance type has EFA (network.rdma: auto)"
TAG_NODE, TAG_COMMAND, TAG_CANCELLED, TAG_LOGS = ("cloudtrain:node", "cloudtrain:command", "cloudtrain:cancelled",
                                                  "cloudtrain:log-group")
TAG_OUTPUT = "cloudtrain:output"  # storage.output: where `cloudtrain outputs` finds the job's output
MAX_TAG_VALUE = 256  # EC2's longest tag value
IMAGE_PLACEHOLDER = "<providers.ec2.image_id>"
PROFILE_PLACEHOLDER = "<providers.ec2.instance_profile>"
CODE_PLACEHOLDER = "s3://<providers.ec2.code_s3>"
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS")
ENDED = ("shutting-down", "terminated", "stopping", "stopped")
MAX_RUNTIME = 172800  # seconds: AWS-RunShellScript's executionTimeout
CHECKPOINT_SYNC_SECONDS = 60  # how often a node copies its checkpoint directory to storage.checkpoint
# ``python3 -c FETCH URL FILE``: the presigned URL's object to FILE, in chunks (then unpack.BOOTSTRAP
# checks its sha256 and unpacks it: the node needs no S3 permission, and no cloudtrain installed).
FETCH = ("import shutil,sys,urllib.request as u\n"
         "with u.urlopen(sys.argv[1], timeout=900) as r, open(sys.argv[2], 'wb') as f: shutil.copyfileobj(r, f, 1 << 20)")
FAILED_LINE = re.compile(r"^\[cloudtrain\] node \S+ failed while (.+) \(exit -?\d+\)$", re.M)  # node_end's


class Ec2Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image_id: Optional[str] = Field(None, description="AMI with Python 3.8+, the job's framework and the SSM agent, e.g. an AWS Deep Learning AMI (needed to submit)")
    instance_type: Optional[str] = Field(None, description="EC2 instance type (default: resolved from resources.accelerator x gpus_per_node or resources.instance_type, see docs/resources.md; m5.xlarge without GPUs)")
    instance_profile: Optional[str] = Field(None, description="IAM instance profile (name or ARN) with AmazonSSMManagedInstanceCore (needed to submit)")
    code_s3: Optional[str] = Field(None, description="s3://bucket/prefix for the code archives; nodes fetch theirs with a presigned URL (needed to submit)")
    region: Optional[str] = Field(None, description="AWS region (default: boto3's: AWS_DEFAULT_REGION, the profile's region)")
    subnet_id: Optional[str] = Field(None, description="subnet of every node (needed for EFA)")
    security_group_ids: List[str] = Field(default_factory=list, description="security groups; nodes must reach each other on every port (a self-referencing rule)")
    key_name: Optional[str] = Field(None, description="EC2 key pair for your own ssh access")
    placement_group: Optional[str] = Field(None, description="an existing placement group to launch into")
    create_placement_group: bool = Field(True, description="with more than one node and no placement_group: a cluster placement group for the job, cloudtrain-<job id>")
    spot: bool = Field(False, description="spot instances (one-time requests)")
    root_volume_gb: Optional[int] = Field(None, ge=8, le=16384, description="size of the root volume (default: the AMI's)")
    root_device: str = Field("/dev/xvda", description="the AMI's root device name, with root_volume_gb (Ubuntu AMIs: /dev/sda1)")
    python: str = Field("python3", description="the AMI's Python, which runs `cloudtrain launch`")
    setup: List[str] = Field(default_factory=list, description="shell lines every node runs before the launcher, e.g. `. /opt/conda/etc/profile.d/conda.sh && conda activate pytorch`")
    workdir: str = Field("/opt/cloudtrain", description="directory on each node for the job's code and outputs (<workdir>/<job id>)")
    master_port: int = Field(29500, ge=1024, le=65000, description="the master's port (the next two are used too)")
    ssh_port: int = Field(22, ge=1, le=65535, description="mpi/horovod: the port node 0 reaches the others' sshd on; another than 22 starts an extra sshd there")
    ifname: Optional[str] = Field(None, description="network interface for MPI and gloo (btl_tcp_if_include), e.g. ens5 (default: the one that routes to node 0)")
    max_runtime_seconds: int = Field(86400, ge=60, le=MAX_RUNTIME, description="SSM executionTimeout of each node's script")
    ready_timeout_seconds: int = Field(900, ge=1, description="how long submit waits for the instances to run and register with SSM")
    terminate_when_done: bool = Field(True, description="each instance shuts down (and so terminates) a minute after its node ends")
    code_url_expires_seconds: int = Field(3600, ge=60, le=604800, description="validity of the presigned code URL")
    log_group: Optional[str] = Field(None, description="CloudWatch Logs group for live output (SSM CloudWatchOutputConfig; the instance role needs CloudWatch Logs permissions); default: SSM's output, available when a node ends")
    secrets_manager: Dict[str, str] = Field(default_factory=dict, description="where each of the job's secrets is read on the node: NAME -> Secrets Manager ARN or name (ARN#key for a JSON key)")
    tags: Dict[str, str] = Field(default_factory=dict, description="extra tags of the instances")
    run_label: Optional[str] = Field(None, description="any label: changing it makes an otherwise identical job a new one (the spec hash changes)")


CPU_DEFAULT = Instance("m5.xlarge", vcpus=4, memory_gb=16)  # EC2 User Guide, general purpose: m5.xlarge 4 vCPUs, 16 GiB


class Ec2Provider(AwsProvider):
    name = "ec2"
    description = "EC2 instances run through AWS Systems Manager"
    Options = Ec2Options
    catalog_refresh = "cloudtrain_aws.catalog_refresh:refresh"
    required = {"image_id": "ami-0123456789abcdef0", "instance_profile": "cloudtrain-node",
                "code_s3": "s3://my-bucket/cloudtrain", "region": "us-east-1"}
    s3_options = ("code_s3",)
    storage_schemes = ("s3",)  # copied by the node script (cloudtrain_aws.node copy)
    # The one table: an instance's state, or its node's SSM command invocation status -> neutral.
    states = {
        "pending": State.PENDING, "running": State.STARTING, "shutting-down": State.FAILED,
        "terminated": State.FAILED, "stopping": State.FAILED, "stopped": State.FAILED,
        "Pending": State.STARTING, "InProgress": State.RUNNING, "Delayed": State.RUNNING,
        "Cancelling": State.RUNNING, "Success": State.SUCCEEDED, "Cancelled": State.CANCELLED,
        "TimedOut": State.FAILED, "Failed": State.FAILED, "cancelled": State.CANCELLED,
    }

    # -- render (pure) -------------------------------------------------------------------------
    @classmethod
    def instance_rules(cls):
        return EC2_RULES

    @classmethod
    def options(cls, job: JobSpec) -> Ec2Options:
        """The section's options with the neutral spot and max_runtime in them."""
        # SSM's AWS-RunShellScript document: executionTimeout "Maximum is 172800 (48 hours)"
        at_most(job, ("max_runtime",), job.max_runtime, MAX_RUNTIME, "SSM allows a node's script (executionTimeout)")
        return with_neutral(job, cls.name, super().options(job), {
            "spot": (("spot",), job.spot),
            "max_runtime_seconds": (("max_runtime",), job.max_runtime, job.max_runtime_text),
        })

    @staticmethod
    def instance(job: JobSpec, options: Ec2Options) -> Choice:
        """The instance type (from the catalog: resources.accelerator x gpus_per_node, or the named
        one, checked); m5.xlarge for a job without GPUs."""
        return choose(job, EC2_RULES, options.instance_type) or cpu_default(job, EC2_RULES, CPU_DEFAULT)

    @classmethod
    def instance_type(cls, job: JobSpec, options: Ec2Options) -> str:
        return cls.instance(job, options).instance_type

    @classmethod
    def efa_count(cls, job: JobSpec, options: Ec2Options) -> int:
        """EFA interfaces per node known at render: the catalog row's devices when RDMA applies
        (``on``, or ``auto`` with a subnet for them); 0 when unknown until submit."""
        if job.network.rdma == "auto" and not options.subnet_id:
            return 0
        return efa_devices(job.network.rdma, cls.instance(job, options).row)

    def check(self, job: JobSpec, options: Ec2Options) -> None:
        self.instance_type(job, options)
        checkpoint_uri(job, "ec2", ("s3",), "s3://team/ckpt/digits/")
        if job.max_restarts:
            raise self.job_error(job, ("max_restarts",), "the ec2 provider does not restart jobs; set it to 0 "
                                 "(or use sagemaker)")
        if job.network.rdma == "on" and not options.subnet_id:
            raise self.job_error(job, ("providers", "ec2", "subnet_id"), "EFA (network.rdma: on) needs a subnet for "
                                 "its interfaces; set it")
        check_secret_ids(job, "ec2", options.secrets_manager)
        for loc, message in self.ignored(job, options):
            warnings.warn(CloudtrainWarning(str(self.job_error(job, loc, message))), stacklevel=2)
        if job.storage.output and len(job.storage.output) > MAX_TAG_VALUE:
            raise self.job_error(job, ("storage", "output"), f"is {len(job.storage.output)} characters; ec2 keeps it "
                                 f"in a tag of the instances (at most {MAX_TAG_VALUE}): use a shorter s3:// URI")

    @classmethod
    def ignored(cls, job: JobSpec, options: Ec2Options) -> List[Tuple[tuple, str]]:
        """What the job asks for that ec2 will not do, said at validate rather than dropped."""
        out = []
        if job.image:  # the node script runs the launcher on the AMI's own Python, in no container
            out.append((("image",), f"ec2 runs the job on the instances' AMI (providers.ec2.image_id), not in a "
                                    f"container: the image {job.image} is not used here; put the job's software in "
                                    "the AMI or in providers.ec2.setup"))
        row = cls.instance(job, options).row
        if job.network.rdma == "auto" and not options.subnet_id and efa_devices("auto", row):
            out.append((("providers", "ec2", "subnet_id"), f"is not set, so this {row.instance_type} job runs without EFA "
                        f"(its {row.efa} EFA interfaces need a subnet): set subnet_id to use EFA, or network.rdma: "
                        "off to say the job goes without it"))
        return out

    def placement_group(self, job: JobSpec, options: Ec2Options) -> Optional[str]:
        if options.placement_group:
            return options.placement_group
        if options.create_placement_group and job.distribution.nodes > 1:
            return f"cloudtrain-{JOB_ID}"
        return None

    @staticmethod
    def tags(job: JobSpec, options: Ec2Options) -> List[dict]:
        tags = [{"Key": TAG_JOB, "Value": JOB_ID}, {"Key": TAG_NAME, "Value": job.name},
                {"Key": TAG_HASH, "Value": SPEC_HASH}, {"Key": "Name", "Value": JOB_ID}]
        if options.log_group:
            tags.append({"Key": TAG_LOGS, "Value": options.log_group})
        if job.storage.output:
            tags.append({"Key": TAG_OUTPUT, "Value": job.storage.output})
        if options.run_label:
            tags.append({"Key": "cloudtrain:run-label", "Value": options.run_label})
        return tags + [{"Key": k, "Value": v} for k, v in sorted(options.tags.items())]

    def run_instances(self, job: JobSpec, options: Ec2Options) -> dict:
        n = job.distribution.nodes
        profile = options.instance_profile or PROFILE_PLACEHOLDER
        group = self.placement_group(job, options)
        request = {
            "ImageId": options.image_id or IMAGE_PLACEHOLDER,
            "InstanceType": self.instance_type(job, options),
            "MinCount": n, "MaxCount": n,  # all or nothing: a distributed job needs every node
            "ClientToken": JOB_ID,  # idempotent: a retried RunInstances returns the first reservation
            "IamInstanceProfile": {"Arn": profile} if profile.startswith("arn:") else {"Name": profile},
            "KeyName": options.key_name,
            "Placement": {"GroupName": group} if group else None,
            "InstanceInitiatedShutdownBehavior": "terminate" if options.terminate_when_done else None,
            "InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}
            if options.spot else None,
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
            "BlockDeviceMappings": [{"DeviceName": options.root_device,
                                     "Ebs": {"VolumeSize": options.root_volume_gb, "VolumeType": "gp3",
                                             "DeleteOnTermination": True}}] if options.root_volume_gb else None,
            "TagSpecifications": [{"ResourceType": "instance", "Tags": self.tags(job, options)},
                                  {"ResourceType": "volume", "Tags": self.tags(job, options)}],
        }
        known = self.efa_count(job, options)
        if known or job.network.rdma == "on":
            request["NetworkInterfaces"] = efa_interfaces(options, known or 1)
        else:
            request["SubnetId"] = options.subnet_id
            request["SecurityGroupIds"] = list(options.security_group_ids)
        return strip_empty(request)

    def node_script(self, job: JobSpec, options: Ec2Options) -> str:
        """Every node's launch script (POSIX sh, run as root by SSM's AWS-RunShellScript); a node
        finds its rank from the instance id SSM's agent gives it."""
        n = job.distribution.nodes
        py = shlex.quote(options.python)
        q = shlex.quote
        lines = [
            "#!/bin/sh",
            f"# cloudtrain: the script of each of the {n} node(s) of job {JOB_ID} ({job.name}), sent by SSM SendCommand; runs as root",
            "set -eu",
            f"JOB='{JOB_ID}'",
            *self.node_end(options),
            "STEP='finding its rank'",
            "# this node's rank: its instance id's place in the job's instances (node 0 first)",
            f"NODE=$(echo '{INSTANCE_IDS}' | tr , '\\n' | grep -nxF \"${{AWS_SSM_INSTANCE_ID:-none}}\" | cut -d: -f1)",
            'if [ -z "$NODE" ]; then',
            '  echo "[cloudtrain] instance ${AWS_SSM_INSTANCE_ID:-?} is not one of the nodes of $JOB" >&2; exit 2',
            "fi",
            "NODE=$((NODE - 1))",
            "STEP='preparing its work dir and /etc/hosts'",
            f"WORK={q(options.workdir)}/\"$JOB\"",
            'mkdir -p "$WORK/output" && cd "$WORK"',
            "# host names of the job's nodes (node 0 first)",
            'if ! grep -qs "cloudtrain $JOB" /etc/hosts; then',
            "cat >>/etc/hosts <<'CLOUDTRAIN_HOSTS'",
            HOSTS_LINES,
            "CLOUDTRAIN_HOSTS",
            "fi",
            "# the job's code with the launcher, from S3 (a presigned URL: the node needs no S3 permission)",
            "STEP='fetching the code'",
            "if [ ! -d code/.cloudtrain ]; then",
            f"  {py} -c {q(FETCH)} '{CODE_URL}' code.tar.gz",
            "  STEP='checking and unpacking the code'",
            "  rm -rf code.part && mkdir code.part",
            "  " + shlex.join(bootstrap_argv(options.python, CODE_DIGEST, "code.tar.gz", "code.part")),
            "  rm -f code.tar.gz",
            "  rm -rf code && mv code.part code",
            "fi",
        ]
        if job.resources.shm_gb:  # the AMI's /dev/shm: a tmpfs the kernel sizes at half the memory (tmpfs(5))
            lines += ["STEP='sizing /dev/shm'", f"mount -o remount,size={int(job.resources.shm_gb * 1024)}m /dev/shm"]
        if self.uses_ssh(job):
            port = options.ssh_port
            lines += [
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
            if port != 22:  # keep off port 22 when asked (AWS's EC2 multi-node blog: a host-network container may own it) (e.g. a host-network container owns it)
                lines += [f"if ! (ss -ltn 2>/dev/null | grep -q ':{port} '); then mkdir -p /run/sshd && "
                          f"/usr/sbin/sshd -p {port}; fi"]
            lines += [f"export OMPI_MCA_plm_rsh_args='-p {port} -i /root/.ssh/cloudtrain-{JOB_ID} "
                      "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"]
            # node 0 waits until every node's sshd accepts: one started above forks before it listens
            lines += [f"export {SSH_WAIT}={port}"]
        if options.setup:
            lines += ["# providers.ec2.setup", "STEP='running providers.ec2.setup'", *options.setup]
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
        row = self.instance(job, options).row
        if self.efa_count(job, options) or (job.network.rdma == "on" and row is None):
            env.update({k: v for k, v in efa_env(row).items() if k not in job.env})
        lines += ["# the job's environment"]
        lines += [f"export {k}={q(v)}" for k, v in env.items()]
        lines += ['export CLOUDTRAIN_NODE_RANK="$NODE"']
        lines += ['export CLOUDTRAIN_OUTPUT_DIR="$WORK/output"']
        lines += self.inputs_copy(job, options)
        lines += self.checkpoint_sync(job)
        if job.network.rdma == "auto" and row is None:  # a type newer than the catalog: EC2 is asked at submit
            lines.append(EFA_MARK)
        launch = [options.python, "-m", NODE_MODULE.partition(":")[0], "--",
                  *shipping.launch_argv(job, python=options.python)]
        lines += [
            'cd "$WORK/code"',
            "STEP='running cloudtrain launch'",
            "set +e",
            'PYTHONPATH=.cloudtrain${PYTHONPATH:+:$PYTHONPATH} ' + shlex.join(launch),
            "code=$?",
            'echo "[cloudtrain] node $NODE exited with code $code"',
        ]
        if job.storage.checkpoint:
            lines += ["ckpt_stop", "ckpt_up || true"]
        lines += self.output_copy(job, options)
        lines.append('exit "$code"  # through node_end')
        return "\n".join(lines) + "\n"

    @staticmethod
    def node_end(options: Ec2Options) -> List[str]:
        """The EXIT trap that ends every run of the node script, however it stops: a failed step
        (``set -e``), the launcher's end, ``exit 2`` or a signal.  It names the step that failed
        (``$STEP``: the job's status shows that line), stops the checkpoint sync and, with
        ``terminate_when_done``, schedules the shutdown, so no failure leaves an instance running."""
        lines = [
            "# however this script ends (a failed step, the launcher's end, a signal), node_end ends it: names the",
            "# step that failed, stops the checkpoint sync, schedules the shutdown (terminate_when_done)",
            "# shellcheck disable=SC2317  # reached: the EXIT trap below calls it",
            "node_end() {",
            "  code=$1",
            "  set +e",
            '  [ -z "${SYNC:-}" ] || ckpt_stop',
            '  [ "$code" -eq 0 ] || echo "[cloudtrain] node ${NODE:-?} failed while $STEP (exit $code)" >&2',
        ]
        if options.terminate_when_done:
            lines.append("  shutdown -h +1 'cloudtrain: the job ended' >/dev/null 2>&1 || true")
        return lines + ['  exit "$code"', "}", "trap 'node_end $?' EXIT",
                        "trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM"]

    @staticmethod
    def copy_command(options: Ec2Options) -> str:
        """``cloudtrain_aws.node copy`` from the job's code (boto3 on the AMI, the instance profile's rights)."""
        return (f'PYTHONPATH="$WORK/code/.cloudtrain${{PYTHONPATH:+:$PYTHONPATH}}" {shlex.quote(options.python)} '
                f'-m {NODE_MODULE.partition(":")[0]} copy')

    def inputs_copy(self, job: JobSpec, options: Ec2Options) -> List[str]:
        """storage.inputs on EC2: each s3:// input copied to ``$WORK/input/<name>`` before the
        launcher (a stopped copy stops the node: ``set -e``), seen as CLOUDTRAIN_INPUT_<NAME>."""
        if not job.storage.inputs:
            return []
        lines = ["# storage.inputs: copied from S3 with the instance profile's rights (boto3 on the AMI)"]
        for name, uri in sorted(job.storage.inputs.items()):
            variable = storage.input_env(name)
            lines += [f"STEP={shlex.quote(f'copying storage.inputs.{name} from {uri}')}",
                      f'export {variable}="$WORK/input/{name}"',  # name: [a-z][a-z0-9_]* (job.Storage)
                      f'{self.copy_command(options)} {shlex.quote(uri)} "${variable}"']
        return lines

    def output_copy(self, job: JobSpec, options: Ec2Options) -> List[str]:
        """storage.output on EC2: when the launcher has ended, every node's CLOUDTRAIN_OUTPUT_DIR
        goes to ``<storage.output>/<job id>/`` (one prefix, as a directory the nodes share would
        be); an upload that fails fails a node that succeeded."""
        if not job.storage.output:
            return []
        target = join_s3(job.storage.output, JOB_ID)
        return ["# storage.output: this node's output directory to S3",
                f'[ "$code" -ne 0 ] || STEP={shlex.quote(f"copying its output to {target}")}',
                f'{self.copy_command(options)} "$CLOUDTRAIN_OUTPUT_DIR" {shlex.quote(target)} || '
                f'{{ echo "[cloudtrain] node $NODE: "{shlex.quote(f"its output did not reach {target}")} >&2; '
                '[ "$code" -ne 0 ] || code=3; }']

    @staticmethod
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
            'command -v aws >/dev/null || { echo "[cloudtrain] storage.checkpoint needs the AWS CLI on the AMI" >&2; exit 2; }',
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

    @staticmethod
    def keygen_script() -> str:
        return ("set -eu\ninstall -d -m 700 /root/.ssh\n"
                f"k=/root/.ssh/cloudtrain-{JOB_ID}\n"
                f"[ -f \"$k\" ] || ssh-keygen -q -t ed25519 -N '' -C 'cloudtrain {JOB_ID}' -f \"$k\"\n"
                'cat "$k.pub"\n')

    def send_command(self, options: Ec2Options, comment: str, script: str) -> dict:
        request = {
            "DocumentName": "AWS-RunShellScript",
            "InstanceIds": [INSTANCE_ID],
            "Comment": comment[:100],
            "MaxConcurrency": "100%",  # every node at once: SSM's default (50) would leave some waiting
            "TimeoutSeconds": max(30, options.ready_timeout_seconds),
            "Parameters": {"commands": [script], "executionTimeout": [str(options.max_runtime_seconds)]},
        }
        if options.log_group:
            request["CloudWatchOutputConfig"] = {"CloudWatchOutputEnabled": True,
                                                 "CloudWatchLogGroupName": options.log_group}
        return request

    def code_location(self, options: Ec2Options) -> Tuple[str, str]:
        uri = join_s3(options.code_s3 or CODE_PLACEHOLDER, CODE_DIGEST, "code.tar.gz")
        if options.code_s3:
            return parse_s3(uri)
        return "<providers.ec2.code_s3>", f"{CODE_DIGEST}/code.tar.gz"

    def artifacts(self, job: JobSpec, options: Ec2Options) -> List[Artifact]:
        bucket, key = self.code_location(options)
        out = [Artifact("s3/PutObject", "code", {"Bucket": bucket, "Key": key, "ContentType": "application/gzip"})]
        group = self.placement_group(job, options)
        if group and not options.placement_group:
            out.append(Artifact("ec2/CreatePlacementGroup", group, {
                "GroupName": group, "Strategy": "cluster",
                "TagSpecifications": [{"ResourceType": "placement-group", "Tags": self.tags(job, options)}]}))
        out.append(Artifact("ec2/RunInstances", JOB_ID, self.run_instances(job, options)))
        if self.uses_ssh(job):
            out.append(Artifact("shell/script", "ssh-key", {"node": 0, "shell": "/bin/sh",
                                                            "script": self.keygen_script()}))
        out.append(Artifact("shell/script", "nodes", {"shell": "/bin/sh", "script": self.node_script(job, options)}))
        out.append(Artifact("ssm/SendCommand", f"per {SSM_TARGETS} nodes", self.send_command(
            options, f"cloudtrain {JOB_ID} nodes <first>-<last>", NODE_SCRIPT)))
        secrets = secrets_artifact(job, self.name, options.secrets_manager)
        return out + ([secrets] if secrets else [])

    # -- submit --------------------------------------------------------------------------------
    def _find_by_spec(self, rendered: Rendered, spec: str) -> Optional[str]:
        """The job whose instances carry this spec's job id and that got its scripts (or whose
        instances ended): an earlier submit made it.  Instances without scripts are taken up by
        ``_create`` (an earlier submit stopped before it sent them)."""
        region = self.region_of(rendered.options.region, rendered.job)
        name = job_name(rendered.job, spec)
        instances = self._instances(region, name)
        if instances and (all(tag(i, TAG_COMMAND) for i in instances) or any(i["State"]["Name"] in ENDED
                                                                             for i in instances)):
            return f"{region}/{name}"
        return None

    def _create(self, rendered: Rendered, secrets: Dict[str, str], spec: str) -> str:
        job, options = rendered.job, rendered.options  # preflight checked the options submit needs
        region = self.region_of(options.region, job)
        name = job_name(job, spec)
        targets = [NODE_MODULE]
        values = {**self.code_values(job, spec, targets), JOB_ID: name}
        arts = [Artifact(a.kind, fill(a.name, values), fill(a.content, values)) for a in rendered.artifacts]
        ec2 = self.client("ec2", region)
        instances = self._instances(region, name)
        if not instances:
            request = next(a.content for a in arts if a.kind == "ec2/RunInstances")
            efa = self.instance(job, options).row is None and self.use_efa(job, request["InstanceType"], region)
            if efa and "NetworkInterfaces" not in request and options.subnet_id:
                request["NetworkInterfaces"] = efa_interfaces(options, min(efa["max_interfaces"] or 1,
                                                                           efa["network_cards"] or 1))
                request.pop("SubnetId", None)
                request.pop("SecurityGroupIds", None)
            elif efa and "NetworkInterfaces" in request:
                count = min(efa["max_interfaces"] or 1, efa["network_cards"] or 1)
                request["NetworkInterfaces"] = efa_interfaces(options, count)
            self.upload_code(job, next(a.content for a in arts if a.kind == "s3/PutObject"), targets, region)
            for pg in (a.content for a in arts if a.kind == "ec2/CreatePlacementGroup"):
                from botocore.exceptions import ClientError
                with self.api(f"create the placement group {pg['GroupName']}"):
                    try:
                        ec2.create_placement_group(**pg)
                    except ClientError as exc:
                        if exc.response.get("Error", {}).get("Code") != "InvalidPlacementGroup.Duplicate":
                            raise
            with self.api(f"start {request['MinCount']} {request['InstanceType']} instance(s) for {name}"):
                started = ec2.run_instances(**request)["Instances"]
            instances = sorted(started, key=lambda i: i.get("AmiLaunchIndex", 0))
            for index, inst in enumerate(instances):
                with self.api(f"tag {inst['InstanceId']}"):
                    ec2.create_tags(Resources=[inst["InstanceId"]], Tags=[{"Key": TAG_NODE, "Value": str(index)}])
        self._launch(job, options, arts, region, name, instances, efa=self._efa_env_needed(job, options, region))
        return f"{region}/{name}"

    def _efa_env_needed(self, job: JobSpec, options: Ec2Options, region: str) -> bool:
        if job.network.rdma != "auto" or self.instance(job, options).row is not None:
            return False
        return bool(self.use_efa(job, self.instance_type(job, options), region) and options.subnet_id)

    def _launch(self, job, options, arts, region, name, instances, efa: bool) -> None:
        """Wait for the instances and SSM, then send the nodes their script (one command per 50)."""
        ec2, ssm = self.client("ec2", region), self.client("ssm", region)
        ids = [i["InstanceId"] for i in sorted(instances, key=node_index)]
        try:
            ips = self._wait_running(region, name, ids, options.ready_timeout_seconds)
            self._wait_ssm(region, ids, options.ready_timeout_seconds)
            upload = next(a.content for a in arts if a.kind == "s3/PutObject")
            with self.api("presign the code URL"):
                url = self.client("s3", region).generate_presigned_url(
                    "get_object", Params={"Bucket": upload["Bucket"], "Key": upload["Key"]},
                    ExpiresIn=options.code_url_expires_seconds)
            values = {MASTER_IP: ips[0], NODE_IPS: ",".join(ips), CODE_URL: url, INSTANCE_IDS: ",".join(ids),
                      HOSTS_LINES: "\n".join(f"{ip} ct-node-{i}  # cloudtrain {name}" for i, ip in enumerate(ips))}
            if job.network.rdma == "auto":
                values[EFA_MARK] = ("export " + " ".join(f"{k}={v}" for k, v in EFA_ENV.items() if k not in job.env)
                                    if efa else f"# no EFA: EC2 says {self.instance_type(job, options)} has none "
                                                "(or no subnet_id)")
            if self.uses_ssh(job):
                keygen = next(a.content["script"] for a in arts if a.kind == "shell/script" and a.name == "ssh-key")
                values[SSH_KEY] = self._run_and_read(region, ids[0], options, f"cloudtrain {name} ssh key",
                                                     keygen).strip().splitlines()[-1]
            template = next(a.content for a in arts if a.kind == "ssm/SendCommand")
            script = fill(next(a.content["script"] for a in arts if a.kind == "shell/script" and a.name == "nodes"),
                          values)
            for first in range(0, len(ids), SSM_TARGETS):
                batch = ids[first:first + SSM_TARGETS]
                last = first + len(batch) - 1
                request = fill(template, {"<first>": str(first), "<last>": str(last), NODE_SCRIPT: script})
                request["InstanceIds"] = batch
                with self.api(f"send the script to nodes {first}-{last} (SSM)"):
                    command = ssm.send_command(**request)["Command"]["CommandId"]
                    ec2.create_tags(Resources=batch, Tags=[{"Key": TAG_COMMAND, "Value": command}])
        except BaseException:
            # nothing runs the job: do not leave instances that cost money
            try:
                ec2.terminate_instances(InstanceIds=ids)
            except Exception:
                pass
            raise

    def _wait_running(self, region: str, name: str, ids: List[str], timeout: float) -> List[str]:
        deadline = time.monotonic() + timeout
        while True:
            by_id = {i["InstanceId"]: i for i in self._instances(region, name)}
            states = [by_id.get(i, {}).get("State", {}).get("Name", "pending") for i in ids]
            if any(s in ENDED for s in states):
                raise PlatformError(f"instance(s) of {name} ended while starting ({', '.join(states)}); "
                                    "see the EC2 console (capacity, spot interruption) and submit again")
            if all(s == "running" for s in states) and all(by_id[i].get("PrivateIpAddress") for i in ids):
                return [by_id[i]["PrivateIpAddress"] for i in ids]
            if time.monotonic() > deadline:
                raise PlatformError(f"the instances of {name} were not running after {timeout:.0f} s "
                                    "(terminated); raise providers.ec2.ready_timeout_seconds or check capacity")
            time.sleep(max(self.status_poll, 0.01))

    def _wait_ssm(self, region: str, ids: List[str], timeout: float) -> None:
        ssm = self.client("ssm", region)
        deadline = time.monotonic() + timeout
        while True:
            with self.api("ask SSM which instances are online"):
                infos = ssm.describe_instance_information(
                    Filters=[{"Key": "InstanceIds", "Values": ids}])["InstanceInformationList"]
            online = {i["InstanceId"] for i in infos if i.get("PingStatus") == "Online"}
            if all(i in online for i in ids):
                return
            if time.monotonic() > deadline:
                raise PlatformError(
                    f"{len(set(ids) - online)} instance(s) did not register with SSM within {timeout:.0f} s "
                    "(terminated); the AMI needs the SSM agent, the instance profile "
                    "AmazonSSMManagedInstanceCore, and the subnet a route to SSM (NAT or VPC endpoints)")
            time.sleep(max(self.status_poll, 0.01))

    def _run_and_read(self, region: str, instance_id: str, options: Ec2Options, comment: str, script: str) -> str:
        """Run a short script through SSM and return its standard output."""
        ssm = self.client("ssm", region)
        from botocore.exceptions import ClientError
        with self.api(f"run '{comment}' on {instance_id} (SSM)"):
            command = ssm.send_command(DocumentName="AWS-RunShellScript", InstanceIds=[instance_id],
                                       Comment=comment[:100], Parameters={"commands": [script]})["Command"]["CommandId"]
            deadline = time.monotonic() + options.ready_timeout_seconds
            while True:
                try:
                    inv = ssm.get_command_invocation(CommandId=command, InstanceId=instance_id)
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") != "InvocationDoesNotExist":
                        raise
                    inv = {"Status": "Pending"}
                if inv["Status"] == "Success":
                    return inv.get("StandardOutputContent", "")
                if inv["Status"] in ("Failed", "TimedOut", "Cancelled") or time.monotonic() > deadline:
                    raise PlatformError(f"'{comment}' on {instance_id} ended {inv['Status']}: "
                                        f"{inv.get('StandardErrorContent', '')[-500:]}; check the AMI (ssh-keygen)")
                time.sleep(max(self.status_poll, 0.01))

    # -- follow --------------------------------------------------------------------------------
    def _instances(self, region: Optional[str], name: str) -> List[dict]:
        ec2 = self.client("ec2", region)
        found = []
        with self.api(f"describe the instances of {name}"):
            for page in ec2.get_paginator("describe_instances").paginate(
                    Filters=[{"Name": f"tag:{TAG_JOB}", "Values": [name]}]):
                for reservation in page.get("Reservations", []):
                    found += reservation.get("Instances", [])
        return found

    def _invocation(self, region: Optional[str], command: str, instance_id: str) -> dict:
        from botocore.exceptions import ClientError
        with self.api(f"read SSM command {command} on {instance_id}"):
            try:
                return self.client("ssm", region).get_command_invocation(CommandId=command, InstanceId=instance_id)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "InvocationDoesNotExist":
                    raise
                return {"Status": "Pending"}

    def _nodes(self, region: Optional[str], instances: List[dict]) -> dict:
        """The job as one read: its instances in node order, and the SSM invocation of each one's
        command (``GetCommandInvocation``: status, exit code, output) once it was sent."""
        nodes = sorted(instances, key=node_index)
        return {"instances": nodes, "invocations": {i["InstanceId"]: self._invocation(region, tag(i, TAG_COMMAND),
                                                                                    i["InstanceId"])
                                                    for i in nodes if tag(i, TAG_COMMAND)}}

    def _describe(self, job_id: str) -> dict:
        region, name = self.split_id(job_id)
        instances = self._instances(region, name)
        if not instances:
            raise JobNotFound(f"no ec2 job {job_id!r} (no instance tagged {TAG_JOB}={name}); "
                              "cloudtrain list -p ec2 shows the jobs")
        return self._nodes(region, instances)

    def _to_status(self, job_id: str, described: dict) -> JobStatus:
        nodes, invocations = described["instances"], described["invocations"]
        per_node = []
        for index, inst in enumerate(nodes):
            state = inst["State"]["Name"]
            inv = invocations.get(inst["InstanceId"])
            if inv is not None:
                raw = inv["Status"]
                # an instance that ended before its node did: the node failed
                if raw in ("Pending", "InProgress", "Delayed") and state in ENDED:
                    raw = state
                per_node.append((index, raw, inv.get("ResponseCode"), failed_step(inv)))
            else:
                per_node.append((index, state, None, None))
        cancelled = any(tag(i, TAG_CANCELLED) for i in nodes)
        mapped = [(i, raw, code, self.map_state(raw), step) for i, raw, code, step in per_node]
        order = [State.FAILED, State.CANCELLED, State.UNKNOWN, State.PENDING, State.STARTING, State.RUNNING]
        if all(m[3] is State.SUCCEEDED for m in mapped):
            state, raw = State.SUCCEEDED, "Success"
        else:
            worst = min((m for m in mapped if m[3] is not State.SUCCEEDED), key=lambda m: order.index(m[3]))
            state, raw = worst[3], worst[1]
        if cancelled and state is not State.SUCCEEDED:
            state, raw = State.CANCELLED, "cancelled"
        message = ", ".join(f"node {i} {r}" + (f" (exit {c}{f' while {step}' if step else ''})"
                                              if c not in (None, -1) and r in ("Failed", "Success") else "")
                            for i, r, c, _, step in mapped)
        up = sum(1 for m in mapped if m[3] in (State.RUNNING, State.SUCCEEDED))
        launched = [t for t in (timestamp(i.get("LaunchTime")) for i in nodes) if t is not None]
        return JobStatus(handle=self.handle(job_id), state=state, raw_state=raw,
                         name=tag(nodes[0], TAG_NAME) or self.split_id(job_id)[1], message=message, nodes=len(nodes),
                         nodes_up=up, exit_code=state.exit_code if state.terminal else None,
                         created_at=min(launched) if launched else None)

    def _log_chunks(self, job_id: str, described: dict, cursor: Dict[str, Any], final: bool) -> Iterator[str]:
        """With ``log_group`` (the instances' tag): CloudWatch Logs, one stream per node's
        command and stream, ``<command-id>/<instance-id>/aws-runShellScript/stdout``; else SSM's
        output of each node, which it keeps (its first 24,000 characters) once the node's script ends."""
        instances = described["instances"]
        group = tag(instances[0], TAG_LOGS)
        if group:
            nodes = {i["InstanceId"]: node_index(i) for i in instances}
            commands = sorted({tag(i, TAG_COMMAND) for i in instances if tag(i, TAG_COMMAND)})

            def label(stream: str) -> str:  # the node of the stream's instance
                return f"node{nodes.get((stream.split('/') + [''])[1], '?')}"
            yield from self.cloudwatch_chunk(self.split_id(job_id)[0], group, [c + "/" for c in commands], label, cursor)
            return
        shown: Dict[str, int] = cursor.setdefault("shown", {})
        for inst in instances:
            inv = described["invocations"].get(inst["InstanceId"])
            if inv is None:
                continue
            text = inv.get("StandardOutputContent", "") + inv.get("StandardErrorContent", "")
            key = inst["InstanceId"]
            if len(text) > shown.get(key, 0):
                for line in text[shown.get(key, 0):].splitlines():
                    yield f"[node{node_index(inst)}] {line}\n"
                shown[key] = len(text)

    def _stop(self, job_id: str) -> None:
        """Mark the job cancelled and cancel its nodes' commands (``cancel`` then terminates the
        instances)."""
        region, name = self.split_id(job_id)
        instances = self._instances(region, name)
        live = [i["InstanceId"] for i in instances if i["State"]["Name"] not in ("shutting-down", "terminated")]
        if not live:
            return
        from botocore.exceptions import ClientError
        with self.api(f"mark {name} cancelled"):
            self.client("ec2", region).create_tags(Resources=live, Tags=[{"Key": TAG_CANCELLED, "Value": "true"}])
        for command in sorted({tag(i, TAG_COMMAND) for i in instances if tag(i, TAG_COMMAND)}):
            try:
                self.client("ssm", region).cancel_command(CommandId=command)
            except ClientError:
                pass  # it ended meanwhile; the instances go anyway

    def cancel(self, job_id: str) -> JobStatus:
        """``CloudProvider.cancel`` (idempotent: an ended job keeps its state), then the job's
        instances still running are terminated — those tagged with its id, and no other — an
        ended job's too (``terminate_when_done: false``), and its own placement group deleted."""
        status = super().cancel(job_id)
        region, name = self.split_id(job_id)
        instances = self._instances(region, name)
        live = [i["InstanceId"] for i in instances if i["State"]["Name"] not in ("shutting-down", "terminated")]
        ec2 = self.client("ec2", region)
        if live:
            with self.api(f"terminate the instances of {name}"):
                ec2.terminate_instances(InstanceIds=live)
            status = self.fresh_status(job_id)
        group = next((i.get("Placement", {}).get("GroupName") for i in instances
                      if i.get("Placement", {}).get("GroupName") == f"cloudtrain-{name}"), None)
        if group:
            from botocore.exceptions import ClientError
            try:
                ec2.delete_placement_group(GroupName=group)
            except ClientError:
                pass  # in use until its instances have terminated; empty groups cost nothing
        return status

    def outputs(self, job_id: str, dest) -> List:
        """What the nodes copied to ``<storage.output>/<job id>/`` (the instances' output tag),
        downloaded into ``dest`` with ``objectstore.download``."""
        region, name = self.split_id(job_id)
        instances = self._instances(region, name)
        if not instances:
            raise JobNotFound(f"no ec2 job {job_id!r} (no instance tagged {TAG_JOB}={name}; EC2 forgets terminated "
                              "instances after about an hour: then fetch <storage.output>/<job id>/ with `aws s3 sync`)")
        output = tag(instances[0], TAG_OUTPUT)
        if not output:
            raise BadInput(f"{name} has no storage.output: its nodes kept their output in <workdir>/{name}/output; "
                           "give the job storage.output (an s3:// URI) to get it back with cloudtrain outputs")
        return self.download(join_s3(output, name) + "/", dest, region)

    def list(self) -> List[JobStatus]:
        region = self.region_of(None)
        ec2 = self.client("ec2", region)
        by_job: Dict[str, List[dict]] = {}
        with self.api("list the instances cloudtrain started"):
            for page in ec2.get_paginator("describe_instances").paginate(
                    Filters=[{"Name": "tag-key", "Values": [TAG_JOB]}]):
                for reservation in page.get("Reservations", []):
                    for inst in reservation.get("Instances", []):
                        by_job.setdefault(tag(inst, TAG_JOB), []).append(inst)
        return [self._to_status(f"{region}/{name}", self._nodes(region, insts)) for name, insts in sorted(by_job.items())]


def tag(instance: dict, key: str) -> Optional[str]:
    return next((t["Value"] for t in instance.get("Tags") or [] if t["Key"] == key), None)


def failed_step(invocation: dict) -> Optional[str]:
    """What the node was doing when it failed: node_end's last line, ``[cloudtrain] node N failed
    while STEP (exit C)``, in the standard error SSM keeps (``GetCommandInvocation``: its first 8,000
    characters, once the script has ended)."""
    found = FAILED_LINE.findall(invocation.get("StandardErrorContent") or "")
    return found[-1] if found else None


def node_index(instance: dict) -> int:
    value = tag(instance, TAG_NODE)
    return int(value) if value is not None and value.isdigit() else int(instance.get("AmiLaunchIndex", 0))


def efa_interfaces(options: Ec2Options, count: int) -> List[dict]:
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
    def one(card: int, device: int, kind: str) -> dict:
        return strip_empty({"DeviceIndex": device, "NetworkCardIndex": card, "InterfaceType": kind,
                            "SubnetId": options.subnet_id or "<providers.ec2.subnet_id>",
                            "Groups": list(options.security_group_ids), "DeleteOnTermination": True})
    if count <= 1:
        return [one(0, 0, "efa")]
    return [one(0, 0, "interface"), one(0, 1, "efa-only"), *(one(card, 0, "efa-only") for card in range(1, count))]
