"""``ec2``: plain EC2 instances, one per node, run through AWS Systems Manager (SSM).

Rendering gives the ``RunInstances`` request (N instances, a cluster placement group, EFA
interfaces when RDMA applies, the job's tags), the code upload, and each node's launch script
(``shell/script``, one for every node): host names, the job's code fetched from S3, the node's
rank (its instance id's place in the job's instance list; SSM's agent sets ``AWS_SSM_INSTANCE_ID``),
``cloudtrain launch``; for mpi/horovod, ssh from node 0 to the others as AWS's blog on multi-node
training on EC2 advises (``-x``
forwarding and ``btl_tcp_if_include`` come from the launcher; thread variables default to 1;
a non-default ssh port when asked).  Submitting starts the instances, waits until SSM sees
them, then sends the script with one ``SendCommand`` per 50 nodes (SSM's limit), all nodes at once.
Status comes from the command
invocations and the instances' states, logs from SSM's output (or CloudWatch Logs), and
``cancel`` terminates only instances tagged with the job's id.  The lifecycle is
``CloudProvider``'s: this module checks the options and gives the EC2 and SSM calls; the request
(and the nodes' script, from the template ``ec2_node.sh``) is built in ``render.py``, the options
are ``options.py``'s.
"""
from __future__ import annotations

import re
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple

from cloudtrain.providers.cloud import timestamp
from cloudtrain.spec.errors import BadInput, CloudtrainWarning, JobNotFound, PlatformError
from cloudtrain.catalogs.instances import Choice
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.provider import JobStatus, State
from cloudtrain.providers.request import Rendered, fill
from cloudtrain.providers.survival import at_most, checkpoint_uri, with_neutral
from cloudtrain.orchestrate.failures import CAPACITY, NODE_FAILURE, PREEMPTION

from .common import AwsProvider
from .instances import EC2_RULES, efa_devices
from .options import EC2_MAX_RUNTIME, Ec2Options
from .render import (FIRST_NODE, JOB_ID, LAST_NODE, NODE_MODULE, NODE_SCRIPT, SSM_TARGETS, TAG_JOB,
                     TAG_LOGS, TAG_NAME, TAG_OUTPUT, Ec2Request, check_secret_ids, ec2_instance, ec2_request,
                     job_name, join_s3)

TAG_NODE, TAG_COMMAND, TAG_CANCELLED = "cloudtrain:node", "cloudtrain:command", "cloudtrain:cancelled"
MAX_TAG_VALUE = 256  # EC2's longest tag value
ENDED = ("shutting-down", "terminated", "stopping", "stopped")
FAILED_LINE = re.compile(r"^\[cloudtrain\] node \S+ failed while (.+) \(exit -?\d+\)$", re.M)  # node_end's


def ended_reason(instance: dict) -> str:
    """`` [Server.SpotInstanceTermination: ...]`` for an instance that ended: its ``StateReason``
    (EC2 API reference, StateReason data type; DescribeInstances), which the controller reads as a
    preemption, capacity or node failure (cloudtrain.orchestrate.failures); empty otherwise."""
    if instance["State"]["Name"] not in ENDED:
        return ""
    reason = instance.get("StateReason") or {}
    words = reason.get("Message") or reason.get("Code") or ""
    return f" [{words}]" if words else ""


class Ec2Provider(AwsProvider):
    name = "ec2"
    description = "EC2 instances run through AWS Systems Manager"
    # each instance's output, prefixed [node<i>] (_log_chunks): `cloudtrain logs --node` picks one
    log_selectors = frozenset({"node"})
    log_merged = "its instance logs tell the node ([node<i>]) but neither a rank nor the time of a line"
    # RunInstances' capacity and quota refusals (EC2 API reference, Error codes):
    # ``InsufficientInstanceCapacity``, ``InsufficientHostCapacity``,
    # ``InsufficientReservedInstanceCapacity``, and the quotas ``InstanceLimitExceeded``,
    # ``VcpuLimitExceeded``, ``MaxSpotInstanceCountExceeded``
    capacity_codes = frozenset({"InsufficientInstanceCapacity", "InsufficientHostCapacity",
                                "InsufficientReservedInstanceCapacity", "InstanceLimitExceeded", "VcpuLimitExceeded",
                                "MaxSpotInstanceCountExceeded"})
    # DescribeInstances: Instance.StateReason.Code (EC2 API reference, StateReason data type):
    # Server.SpotInstanceTermination / Server.SpotInstanceShutdown (spot reclaimed),
    # Server.InsufficientInstanceCapacity, Server.InternalError (hardware failure).
    failure_words = ((r"Server\.SpotInstance(?:Termination|Shutdown)", PREEMPTION),
                     (r"Server\.InsufficientInstanceCapacity", CAPACITY),
                     (r"Server\.InternalError", NODE_FAILURE))
    Options = Ec2Options
    catalog_refresh = "cloudtrain_aws.catalog_refresh:refresh"
    required = {"image_id": "ami-0123456789abcdef0", "instance_profile": "cloudtrain-node",
                "code_s3": "s3://my-bucket/cloudtrain", "region": "us-east-1"}
    s3_options = ("code_s3",)
    storage_schemes = ("s3",)  # copied by the node script (cloudtrain_aws.node copy)
    node_modules = (NODE_MODULE,)  # cloudtrain_aws.node: the prelude and its copy command, in the code archive
    # The one table: an instance's state, or its node's SSM command invocation status -> neutral.
    states = {
        "pending": State.PENDING, "running": State.STARTING, "shutting-down": State.FAILED,
        "terminated": State.FAILED, "stopping": State.FAILED, "stopped": State.FAILED,
        "Pending": State.STARTING, "InProgress": State.RUNNING, "Delayed": State.RUNNING,
        "Cancelling": State.RUNNING, "Success": State.SUCCEEDED, "Cancelled": State.CANCELLED,
        "TimedOut": State.FAILED, "Failed": State.FAILED, "cancelled": State.CANCELLED,
    }

    # -- options and checks --------------------------------------------------------------------
    @classmethod
    def instance_rules(cls):
        return EC2_RULES

    @classmethod
    def options(cls, job: JobSpec) -> Ec2Options:
        """The section's options with the neutral spot and max_runtime in them."""
        # SSM's AWS-RunShellScript document: executionTimeout "Maximum is 172800 (48 hours)"
        at_most(job, ("max_runtime",), job.max_runtime, EC2_MAX_RUNTIME,
                "SSM allows a node's script (executionTimeout)")
        return with_neutral(job, cls.name, super().options(job), {
            "spot": (("spot",), job.spot),
            "max_runtime_seconds": (("max_runtime",), job.max_runtime, job.max_runtime_text),
        })

    @staticmethod
    def instance(job: JobSpec, options: Ec2Options) -> Choice:
        """The instance type (``render.ec2_instance``)."""
        return ec2_instance(job, options)

    @classmethod
    def instance_type(cls, job: JobSpec, options: Ec2Options) -> str:
        return cls.instance(job, options).instance_type

    def check(self, job: JobSpec, options: Ec2Options) -> None:
        self.instance_type(job, options)
        checkpoint_uri(job, "ec2", ("s3",), "s3://team/ckpt/digits/")
        if job.max_restarts:  # nothing on the instances restarts a job: the controller submits it again
            from cloudtrain.orchestrate.controller import warn_restarted_by_controller
            warn_restarted_by_controller(job, "the ec2 provider's instances do not restart a job")
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
        out: List[Tuple[tuple, str]] = []
        if job.image:  # the node script runs the launcher on the AMI's own Python, in no container
            out.append((("image",), f"ec2 runs the job on the instances' AMI (providers.ec2.image_id), not in a "
                                    f"container: the image {job.image} is not used here; put the job's software in "
                                    "the AMI or in providers.ec2.setup"))
        row = cls.instance(job, options).row
        if row is not None and job.network.rdma == "auto" and not options.subnet_id and efa_devices("auto", row):
            out.append((("providers", "ec2", "subnet_id"),
                        f"is not set, so this {row.instance_type} job runs without EFA "
                        f"(its {row.efa} EFA interfaces need a subnet): set subnet_id to use EFA, or network.rdma: "
                        "off to say the job goes without it"))
        return out

    # -- render (pure: render.py) --------------------------------------------------------------
    def render_request(self, job: JobSpec, options: Ec2Options) -> Ec2Request:
        return ec2_request(job, options)

    # -- submit --------------------------------------------------------------------------------
    def _find_by_spec(self, rendered: Rendered[Ec2Request], spec: str) -> Optional[str]:
        """The job whose instances carry this spec's job id and that got its scripts (or whose
        instances ended): an earlier submit made it.  Instances without scripts are taken up by
        ``_create`` (an earlier submit stopped before it sent them)."""
        region = self.region_of(rendered.request.region, rendered.job)
        name = job_name(rendered.job, spec)
        instances = self._instances(region, name)
        if instances and (all(tag(i, TAG_COMMAND) for i in instances) or any(i["State"]["Name"] in ENDED
                                                                             for i in instances)):
            return f"{region}/{name}"
        return None

    def _create(self, rendered: Rendered[Ec2Request], secrets: Dict[str, str], spec: str) -> str:
        """Start the instances (unless an earlier submit of this spec did), then ``_launch``: the
        code is in S3 already (``CloudProvider.ship``)."""
        region = self.region_of(rendered.request.region, rendered.job)
        name = job_name(rendered.job, spec)
        sent: Ec2Request = fill(rendered.request, {JOB_ID: name})
        ec2 = self.client("ec2", region)
        # a type the catalog knows had its EFA decided at render; a newer one is looked up in EC2
        efa = self.use_efa(rendered.job, sent.efa_lookup, region) if sent.efa_lookup else None
        instances = self._instances(region, name)
        if not instances:
            request = sent.with_efa(min(efa["max_interfaces"] or 1, efa["network_cards"] or 1)) if efa \
                else sent.run_instances
            if sent.placement_group:
                from botocore.exceptions import ClientError
                with self.api(f"create the placement group {sent.placement_group['GroupName']}"):
                    try:
                        ec2.create_placement_group(**sent.placement_group)
                    except ClientError as exc:
                        if exc.response.get("Error", {}).get("Code") != "InvalidPlacementGroup.Duplicate":
                            raise
            with self.api(f"start {request['MinCount']} {request['InstanceType']} instance(s) for {name}"):
                started = ec2.run_instances(**request)["Instances"]
            instances = sorted(started, key=lambda i: i.get("AmiLaunchIndex", 0))
        # From here until the scripts are sent nothing runs the job: a step that fails (a tag
        # refused, SSM never seeing an instance, an interrupt) leaves no instance that costs
        # money (CloudProvider.schedule undoes this).  Instances an earlier submit of this spec
        # started and left without scripts are this submit's to finish or to end, the same way.
        ids = [i["InstanceId"] for i in instances]
        self.made(f"{len(ids)} instance(s) of {name} in {region}: {', '.join(ids)}",
                  lambda: self._terminate(region, name, ids))
        if not all(tag(i, TAG_NODE) for i in instances):
            for index, inst in enumerate(instances):
                with self.api(f"tag {inst['InstanceId']}"):
                    ec2.create_tags(Resources=[inst["InstanceId"]], Tags=[{"Key": TAG_NODE, "Value": str(index)}])
        self._launch(sent, rendered.options, region, name, instances, efa=bool(efa and sent.subnet_id))
        return f"{region}/{name}"

    def _launch(self, sent: Ec2Request, options: Ec2Options, region: str, name: str, instances: List[dict],
                efa: bool) -> None:
        """Wait for the instances and SSM, then send the nodes their script (one command per 50)."""
        ec2, ssm = self.client("ec2", region), self.client("ssm", region)
        ids = [i["InstanceId"] for i in sorted(instances, key=node_index)]
        ips = self._wait_running(region, name, ids, options.ready_timeout_seconds)
        self._wait_ssm(region, ids, options.ready_timeout_seconds)
        with self.api("presign the code URL"):
            url = self.client("s3", region).generate_presigned_url(
                "get_object", Params={"Bucket": sent.put["Bucket"], "Key": sent.put["Key"]},
                ExpiresIn=options.code_url_expires_seconds)
        key = None
        if sent.keygen is not None:
            key = self._run_and_read(region, ids[0], options, f"cloudtrain {name} ssh key",
                                     sent.keygen).strip().splitlines()[-1]
        script = fill(sent.node_script, sent.launch_values(ips, ids, url, key, efa))
        for first in range(0, len(ids), SSM_TARGETS):
            batch = ids[first:first + SSM_TARGETS]
            last = first + len(batch) - 1
            request = fill(sent.send_command, {FIRST_NODE: str(first), LAST_NODE: str(last), NODE_SCRIPT: script})
            request["InstanceIds"] = batch
            with self.api(f"send the script to nodes {first}-{last} (SSM)"):
                command = ssm.send_command(**request)["Command"]["CommandId"]
                ec2.create_tags(Resources=batch, Tags=[{"Key": TAG_COMMAND, "Value": command}])

    def _terminate(self, region: str, name: str, ids: List[str]) -> None:
        with self.api(f"terminate the instances of {name}"):
            self.client("ec2", region).terminate_instances(InstanceIds=ids)

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
        return {"instances": nodes, "invocations": {instance_id: self._invocation(region, command, instance_id)
                                                    for instance_id, command in commands(nodes).items()}}

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
                            + ended_reason(nodes[i]) for i, r, c, _, step in mapped)
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
            sent = sorted(set(commands(instances).values()))

            def label(stream: str) -> str:  # the node of the stream's instance
                return f"node{nodes.get((stream.split('/') + [''])[1], '?')}"
            yield from self.cloudwatch_chunk(self.split_id(job_id)[0], group, [c + "/" for c in sent], label,
                                             cursor)
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
        """Mark the job cancelled and cancel its nodes' commands (``_release`` then terminates the
        instances)."""
        region, name = self.split_id(job_id)
        instances = self._instances(region, name)
        live = [i["InstanceId"] for i in instances if i["State"]["Name"] not in ("shutting-down", "terminated")]
        if not live:
            return
        from botocore.exceptions import ClientError
        with self.api(f"mark {name} cancelled"):
            self.client("ec2", region).create_tags(Resources=live, Tags=[{"Key": TAG_CANCELLED, "Value": "true"}])
        for command in sorted(set(commands(instances).values())):
            try:
                self.client("ssm", region).cancel_command(CommandId=command)
            except ClientError:
                pass  # it ended meanwhile; the instances go anyway

    def _release(self, job_id: str) -> bool:
        """On cancel, whatever the job's state: its instances still running are terminated — those
        tagged with its id, and no other — an ended job's too (``terminate_when_done: false``),
        and its own placement group deleted."""
        region, name = self.split_id(job_id)
        instances = self._instances(region, name)
        live = [i["InstanceId"] for i in instances if i["State"]["Name"] not in ("shutting-down", "terminated")]
        ec2 = self.client("ec2", region)
        if live:
            with self.api(f"terminate the instances of {name}"):
                ec2.terminate_instances(InstanceIds=live)
        group = next((i.get("Placement", {}).get("GroupName") for i in instances
                      if i.get("Placement", {}).get("GroupName") == f"cloudtrain-{name}"), None)
        if group:
            from botocore.exceptions import ClientError
            try:
                ec2.delete_placement_group(GroupName=group)
            except ClientError:
                pass  # in use until its instances have terminated; empty groups cost nothing
        return bool(live)

    def outputs(self, job_id: str, dest) -> List:
        """What the nodes copied to ``<storage.output>/<job id>/`` (the instances' output tag),
        downloaded into ``dest`` with ``objectstore.download``."""
        region, name = self.split_id(job_id)
        instances = self._instances(region, name)
        if not instances:
            raise JobNotFound(f"no ec2 job {job_id!r} (no instance tagged {TAG_JOB}={name}; EC2 forgets terminated "
                              "instances after about an hour: then fetch <storage.output>/<job id>/ with "
                              "`aws s3 sync`)")
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
                        job = tag(inst, TAG_JOB)
                        if job is not None:  # the filter asked for instances with the tag
                            by_job.setdefault(job, []).append(inst)
        return [self._to_status(f"{region}/{name}", self._nodes(region, insts))
                for name, insts in sorted(by_job.items())]


def tag(instance: dict, key: str) -> Optional[str]:
    return next((t["Value"] for t in instance.get("Tags") or [] if t["Key"] == key), None)


def commands(instances: List[dict]) -> Dict[str, str]:
    """Instance id -> the SSM command sent to it (its ``TAG_COMMAND``), for the instances that have one."""
    out = {}
    for instance in instances:
        command = tag(instance, TAG_COMMAND)
        if command:
            out[instance["InstanceId"]] = command
    return out


def failed_step(invocation: dict) -> Optional[str]:
    """What the node was doing when it failed: node_end's last line, ``[cloudtrain] node N failed
    while STEP (exit C)``, in the standard error SSM keeps (``GetCommandInvocation``: its first 8,000
    characters, once the script has ended)."""
    found = FAILED_LINE.findall(invocation.get("StandardErrorContent") or "")
    return found[-1] if found else None


def node_index(instance: dict) -> int:
    value = tag(instance, TAG_NODE)
    return int(value) if value is not None and value.isdigit() else int(instance.get("AmiLaunchIndex", 0))
