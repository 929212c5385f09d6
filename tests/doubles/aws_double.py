"""The AWS test double: moto in server mode on 127.0.0.1 (real HTTP through boto3), with a thin
WSGI layer in front of moto's own app that

- counts every API call, per service and action and per SageMaker training job (server side);
- injects faults on demand: throttling (400 ThrottlingException / RequestLimitExceeded), 5xx,
  and ``drop``: the call reaches moto and takes effect, then the connection is closed without a
  response (what a client sees when a response times out);
- adds what moto lacks, by handling the call or changing moto's backend state:
  SageMaker: a taken name is ``ResourceInUse``; jobs start ``InProgress/Starting`` (moto: at once
  ``Completed``) and move when a test says so; ``StopTrainingJob`` (moto: HTTP 500) stops them;
  ``Environment``/``RetryStrategy`` are echoed by ``DescribeTrainingJob``.
  EC2: placement groups (moto: not implemented), ``RunInstances`` keeps ``Placement.GroupName``
  and the ``efa`` interface type (moto drops both) and refuses EFA on types without it;
  ``ClientToken`` makes a repeated ``RunInstances`` return the first reservation.
  SSM: ``DescribeInstanceInformation`` (running instances are online), commands start
  ``InProgress`` (moto: ``Success`` at once) until a test finishes them, ``CancelCommand``.

Used by the aws plugin's tests and by bench/bench_submit.py.
"""
from __future__ import annotations

import io
import json
import logging
import re
import socket
import threading
import time
import uuid
import weakref
from collections import Counter, defaultdict
from datetime import datetime, timezone
from typing import Dict, List, Optional
from urllib.parse import parse_qs

from moto.core import DEFAULT_ACCOUNT_ID
from doubles.moto_double import MotoDouble

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
logging.getLogger("werkzeug").setLevel(logging.ERROR)


def _now():
    return datetime.now(timezone.utc)


def session():
    """A boto3 session with the double's test credentials (no call is made to build it)."""
    import boto3
    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                 aws_session_token="testing", region_name=REGION)


def eks_token_ok(header: str, cluster: str = "train") -> bool:
    """An EKS bearer token: k8s-aws-v1.<base64url of a presigned STS GetCallerIdentity URL>
    (what the loopback API server accepts in front of an EKS cluster)."""
    import base64
    from urllib.parse import urlparse
    if not header.startswith("Bearer k8s-aws-v1."):
        return False
    raw = header[len("Bearer k8s-aws-v1."):]
    url = urlparse(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode())
    q = {k: v[0] for k, v in parse_qs(url.query).items()}
    return (url.netloc == f"sts.{REGION}.amazonaws.com" and q["Action"] == "GetCallerIdentity"
            and "x-k8s-aws-id" in q["X-Amz-SignedHeaders"].split(";") and q["X-Amz-Expires"] == "60"
            and q["X-Amz-Credential"].startswith("testing/"))


# EC2 region backend -> its default AMIs and their snapshots, as moto made them (see reset_ec2)
_DEFAULT_AMIS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def reset_ec2(backend) -> None:
    """Reset one region's EC2 backend to moto's start, keeping the default AMIs made the first time.

    moto's reset rebuilds the backend with its ~1,300 default AMIs of the region (``ami-12c6146b``
    among them), each with a volume and a snapshot: about 0.6 s a reset, the largest single cost
    of the suite. The first reset here is moto's own; after it the AMIs and their snapshots are kept
    and put back into a backend rebuilt without loading them (they are read-only to cloudtrain and
    the tests: nothing deregisters, shares or tags them; tags live in the backend, which is new)."""
    defaults = _DEFAULT_AMIS.get(backend)
    if defaults is None:
        backend.reset()
        _DEFAULT_AMIS[backend] = (dict(backend.amis), dict(backend.snapshots))
        return
    amis, snapshots = defaults
    region, account = backend.region_name, backend.account_id
    backend.__dict__ = {}                    # what moto's BaseBackend.reset does, but ...
    backend._load_amis = lambda: None        # ... the rebuild skips loading the default AMIs
    backend.__init__(region, account)
    del backend._load_amis
    backend.amis.update(amis)
    backend.snapshots.update(snapshots)


class Fault:
    def __init__(self, action: str, kind: str, times: int):
        self.action, self.kind, self.left = action, kind, times


class AwsDouble(MotoDouble):
    """``with AwsDouble() as aws: aws.client("sagemaker")...``"""

    def __init__(self):
        self.calls: Counter = Counter()            # (service, action) -> n
        self.job_calls: Dict[str, Counter] = defaultdict(Counter)  # training job -> action -> n
        self.requests: List[tuple] = []            # (service, action, params) of JSON/query calls
        self.faults: List[Fault] = []
        self.lock = threading.Lock()
        self.placement_groups: Dict[str, dict] = {}
        self.client_tokens: Dict[str, tuple] = {}
        self.stopping: set = set()
        self.dropped = 0
        # script -> (status, stdout) or None: what an SSM command does at once (e.g. ssh-keygen)
        self.run_command = lambda script: None
        self.ssm_online = True  # False: instances never register with SSM (no agent, no role)


    def fresh(self, monkeypatch, bucket: str, instance_profile: Optional[str] = None) -> "AwsDouble":
        """Between tests: moto's state, cloudtrain's per-process caches (uploads, EFA facts) and
        the counts forgotten, followers polling at once, an empty ``bucket`` and, if named, an
        ``instance_profile``; the calls that made those are not counted."""
        import cloudtrain_aws.common as common
        self.reset()
        from cloudtrain.transfer.objectstore import forget_uploads
        forget_uploads()
        common._efa.clear()
        monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0")
        self.client("s3").create_bucket(Bucket=bucket)
        if instance_profile:
            self.client("iam").create_instance_profile(InstanceProfileName=instance_profile)
        self.calls.clear()
        return self

    def reset(self, services=("sagemaker", "s3", "logs", "ssm", "secretsmanager", "ec2", "iam")) -> None:
        """Forget every resource of ``services`` (moto's state) and every count."""
        from moto.backends import get_backend
        for service in services:
            for account in list(get_backend(service).keys()):
                for backend in list(get_backend(service)[account].values()):  # the regions in use
                    if service == "ec2":
                        reset_ec2(backend)
                    else:
                        backend.reset()
        with self.lock:
            self.calls.clear()
            self.job_calls.clear()
            self.requests.clear()
            self.faults.clear()
            self.placement_groups.clear()
            self.client_tokens.clear()
            self.stopping.clear()
            self.dropped = 0
            self.ssm_online = True
            self.run_command = lambda script: None

    # -- clients --------------------------------------------------------------------------------
    def env(self, **extra) -> Dict[str, str]:
        """Variables that point boto3 (in a subprocess: the CLI) at the double."""
        env = dict(CREDENTIALS, AWS_ENDPOINT_URL=self.endpoint, AWS_DEFAULT_REGION=REGION, AWS_REGION=REGION,
                   AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                   CLOUDTRAIN_POLL_SECONDS="0.05")
        env.update(extra)
        return env

    def client(self, service: str, **config):
        if not config:
            return self.clients(service)[service]
        return self._new_client(service, **config)

    def _new_client(self, service: str, **config):
        import boto3
        from botocore.config import Config
        retries = config.pop("retries", {"mode": "standard", "max_attempts": 5})
        return boto3.session.Session().client(
            service, region_name=REGION, endpoint_url=self.endpoint,
            aws_access_key_id="testing", aws_secret_access_key="testing", aws_session_token="testing",
            config=Config(retries=retries, **config))

    def clients(self, *services: str) -> dict:
        """Clients for a provider (made once: loading a service model takes a while)."""
        if not hasattr(self, "_clients"):
            self._clients = {}
        for s in services or ("sagemaker", "s3", "logs", "ec2", "ssm"):
            if s not in self._clients:
                self._clients[s] = self._new_client(s)
        return {s: self._clients[s] for s in (services or ("sagemaker", "s3", "logs", "ec2", "ssm"))}

    def eks_cluster(self, name: str, endpoint: str) -> None:
        """An EKS cluster ``name`` whose API server is ``endpoint`` (moto makes one up: the
        loopback API server takes its place)."""
        eks = self.client("eks")
        try:
            eks.create_cluster(name=name, roleArn="arn:aws:iam::123456789012:role/eks",
                               resourcesVpcConfig={"subnetIds": ["subnet-1"]})
        except eks.exceptions.ResourceInUseException:
            pass  # moto's EKS state outlives its reset within one process: an earlier test made it
        from moto.eks.models import eks_backends
        eks_backends[DEFAULT_ACCOUNT_ID][REGION].clusters[name].endpoint = endpoint

    # -- faults ---------------------------------------------------------------------------------
    def fail(self, action: str, kind: str = "throttle", times: int = 1) -> None:
        """The next ``times`` calls of ``action`` (e.g. ``CreateTrainingJob``) fail: ``throttle``,
        ``5xx``, ``forbidden`` (403 AccessDenied), or ``drop`` (moto does the work, the client gets no response)."""
        with self.lock:
            self.faults.append(Fault(action, kind, times))

    def _take_fault(self, action: str) -> Optional[Fault]:
        with self.lock:
            for fault in self.faults:
                if fault.action == action and fault.left > 0:
                    fault.left -= 1
                    return fault
        return None

    def count(self, action: str, service: Optional[str] = None) -> int:
        return sum(n for (s, a), n in self.calls.items() if a == action and (service is None or s == service))

    # -- backends -------------------------------------------------------------------------------
    @staticmethod
    def backend(service: str):
        from moto.backends import get_backend
        return get_backend(service)[DEFAULT_ACCOUNT_ID][REGION]

    def training_job(self, name: str):
        return self.backend("sagemaker").training_jobs[name]

    def set_training(self, name: str, status: str, secondary: str, message: str = "",
                     failure: Optional[str] = None) -> None:
        """Move a training job, as SageMaker would (status, secondary status, a transition)."""
        job = self.training_job(name)
        now = _now()
        if job.secondary_status_transitions:
            job.secondary_status_transitions[-1]["EndTime"] = now
        job.secondary_status_transitions.append({"Status": secondary, "StartTime": now,
                                                 "StatusMessage": message or secondary})
        job.training_job_status, job.secondary_status = status, secondary
        job.last_modified_time = now
        if secondary == "Training" and job.training_start_time is None:
            job.training_start_time = now
        if status in ("Completed", "Failed", "Stopped"):
            job.training_end_time = now
        if failure:
            job.failure_reason = failure

    def emit_logs(self, job: str, host: str, lines: List[str], group: str = "/aws/sagemaker/TrainingJobs",
                  stream: Optional[str] = None) -> None:
        """What SageMaker's log agent does: one stream per host, events with timestamps."""
        logs = self.client("logs")
        try:
            logs.create_log_group(logGroupName=group)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        stream = stream or f"{job}/{host}-1700000000"
        try:
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        base = int(time.time() * 1000)
        logs.put_log_events(logGroupName=group, logStreamName=stream,
                            logEvents=[{"timestamp": base + i, "message": line} for i, line in enumerate(lines)])

    def instances(self, **filters) -> list:
        """moto's instance objects (every state)."""
        return [i for r in self.backend("ec2").all_reservations() for i in r.instances]

    def commands(self) -> list:
        return list(self.backend("ssm")._commands)

    def finish_command(self, command_id: str, instance_id: str, status: str = "Success", stdout: str = "",
                       stderr: str = "", code: int = 0) -> None:
        for command in self.commands():
            if command.command_id == command_id:
                for inv in command.invocations:
                    if inv["InstanceId"] == instance_id:
                        inv.update(Status=status, StatusDetails=status, ResponseCode=code,
                                   StandardOutputContent=stdout, StandardErrorContent=stderr)
                if all(i["Status"] not in ("Pending", "InProgress") for i in command.invocations):
                    command.status = status
                return
        raise KeyError(command_id)

    # -- the WSGI layer -------------------------------------------------------------------------
    def middleware(self, app):
        double = self

        def wsgi(environ, start_response):
            service, action, params = double._classify(environ)
            with double.lock:
                double.calls[(service, action)] += 1
                if service == "sagemaker" and isinstance(params, dict) and params.get("TrainingJobName"):
                    double.job_calls[params["TrainingJobName"]][action] += 1
                if params is not None:
                    double.requests.append((service, action, params))
            fault = double._take_fault(action)
            if fault and fault.kind == "forbidden":  # no permission (S3 answers a HEAD so for a missing key too)
                return double._error(start_response, service, 403, "AccessDenied", "Access Denied")
            if fault and fault.kind in ("throttle", "5xx"):
                return double._error(start_response, service, 400 if fault.kind == "throttle" else 503,
                                     ("ThrottlingException" if service != "ec2" else "RequestLimitExceeded")
                                     if fault.kind == "throttle" else "ServiceUnavailable",
                                     "Rate exceeded" if fault.kind == "throttle" else "Service unavailable")
            handler = getattr(double, f"_on_{service}_{action}", None)
            result = handler(environ, params) if handler else None
            if result is None:
                result = double._forward(app, environ)
                after = getattr(double, f"_after_{service}_{action}", None)
                if after is not None:
                    result = after(params, result) or result
            status, headers, body = result
            if fault and fault.kind == "drop":
                with double.lock:
                    double.dropped += 1
                sock = environ.get("werkzeug.socket")
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                start_response("500 Dropped", [("Content-Length", "0")])
                return [b""]
            start_response(status, headers)
            return [body]
        return wsgi

    @staticmethod
    def _forward(app, environ) -> tuple:
        captured = {}

        def start_response(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
        body = b"".join(app(environ, start_response))
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        return captured["status"], headers + [("Content-Length", str(len(body)))], body

    @staticmethod
    def _classify(environ) -> tuple:
        auth = environ.get("HTTP_AUTHORIZATION", "")
        m = re.search(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/", auth)
        service = m.group(1) if m else ("s3" if "X-Amz-Credential" in environ.get("QUERY_STRING", "") else "?")
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if service == "s3":
            return "s3", "S3." + environ.get("REQUEST_METHOD", "?"), None
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        if target:
            try:
                params = json.loads(body or b"{}")
            except ValueError:
                params = {}
            return service, target.rsplit(".", 1)[-1], params
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        return service, form.get("Action", "?"), form

    @staticmethod
    def _json(status: int, data: dict) -> tuple:
        body = json.dumps(data).encode()
        return (f"{status} {'OK' if status == 200 else 'Error'}",
                [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(body))),
                 ("x-amzn-RequestId", str(uuid.uuid4()))], body)

    @staticmethod
    def _xml(status: int, text: str) -> tuple:
        body = text.encode()
        return (f"{status} {'OK' if status == 200 else 'Error'}",
                [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))], body)

    def _error(self, start_response, service, status, code, message):
        if service == "ec2":
            result = self._xml(status, f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
                                       f"</Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>")
        else:
            result = self._json(status, {"__type": code, "message": message})
        start_response(result[0], result[1])
        return [result[2]]

    def _json_error(self, status, code, message):
        return self._json(status, {"__type": code, "message": message})

    def _xml_error(self, code, message, status=400):
        return self._xml(status, f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
                                 f"</Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>")

    # -- SageMaker ------------------------------------------------------------------------------
    def _on_sagemaker_CreateTrainingJob(self, environ, params):
        name = params.get("TrainingJobName")
        if name in self.backend("sagemaker").training_jobs:
            arn = f"arn:aws:sagemaker:{REGION}:{DEFAULT_ACCOUNT_ID}:training-job/{name}"
            return self._json_error(400, "ResourceInUse", f"Training job names must be unique within an AWS account "
                                                          f"and region, and a training job with this name already "
                                                          f"exists ({arn})")
        return None

    def _after_sagemaker_CreateTrainingJob(self, params, result):
        if not result[0].startswith("200"):
            return None
        job = self.training_job(params["TrainingJobName"])
        now = _now()
        job.training_job_status, job.secondary_status = "InProgress", "Starting"
        job.secondary_status_transitions = [{"Status": "Starting", "StartTime": now,
                                             "StatusMessage": "Launching requested ML instances"}]
        job.training_start_time = job.training_end_time = None
        job.final_metric_data_list = []
        job.algorithm_specification.pop("MetricDefinitions", None)
        for key, attr in (("Environment", "environment"), ("RetryStrategy", "retry_strategy")):
            if key in params:
                setattr(job, attr, params[key])
        return None

    def _on_sagemaker_DescribeTrainingJob(self, environ, params):
        name = params.get("TrainingJobName")
        if name in self.stopping:  # a stop takes one describe to complete
            self.stopping.discard(name)
            self.set_training(name, "Stopped", "Stopped", "Stopped by the user")
        return None

    def _after_sagemaker_ListTrainingJobs(self, params, result):
        """Real summaries carry SecondaryStatus; moto's do not."""
        if not result[0].startswith("200"):
            return None
        data = json.loads(result[2])
        jobs = self.backend("sagemaker").training_jobs
        for summary in data.get("TrainingJobSummaries", []):
            job = jobs.get(summary["TrainingJobName"])
            if job is not None:
                summary["TrainingJobStatus"], summary["SecondaryStatus"] = job.training_job_status, job.secondary_status
        return self._json(200, data)

    def _on_sagemaker_StopTrainingJob(self, environ, params):
        name = params.get("TrainingJobName")
        jobs = self.backend("sagemaker").training_jobs
        if name not in jobs:
            arn = f"arn:aws:sagemaker:{REGION}:{DEFAULT_ACCOUNT_ID}:training-job/{name}"
            return self._json_error(400, "ValidationException", f"Could not find training job '{arn}'.")
        job = jobs[name]
        if job.training_job_status != "InProgress":
            return self._json_error(400, "ValidationException", "The request was rejected because the training "
                                                                f"job is in status {job.training_job_status}.")
        self.set_training(name, "Stopping", "Stopping", "Stopping the training job")
        self.stopping.add(name)
        return self._json(200, {})

    # -- EC2 ------------------------------------------------------------------------------------
    @staticmethod
    def _indexed(params: dict, prefix: str) -> List[str]:
        return [v for k, v in sorted(params.items()) if re.fullmatch(re.escape(prefix) + r"\.\d+", k)]

    def _pg_xml(self, pg: dict) -> str:
        return (f"<groupName>{pg['name']}</groupName><strategy>{pg['strategy']}</strategy>"
                f"<state>available</state><groupId>{pg['id']}</groupId>")

    def _on_ec2_CreatePlacementGroup(self, environ, params):
        name = params.get("GroupName")
        if name in self.placement_groups:
            return self._xml_error("InvalidPlacementGroup.Duplicate", f"The placement group '{name}' already exists.")
        pg = {"name": name, "strategy": params.get("Strategy", "cluster"), "id": "pg-" + uuid.uuid4().hex[:17]}
        self.placement_groups[name] = pg
        return self._xml(200, '<CreatePlacementGroupResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                              f"<requestId>{uuid.uuid4()}</requestId><placementGroup>{self._pg_xml(pg)}"
                              "</placementGroup></CreatePlacementGroupResponse>")

    def _on_ec2_DescribePlacementGroups(self, environ, params):
        names = self._indexed(params, "GroupName")
        groups = [pg for n, pg in self.placement_groups.items() if not names or n in names]
        items = "".join(f"<item>{self._pg_xml(pg)}</item>" for pg in groups)
        return self._xml(200, '<DescribePlacementGroupsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                              f"<requestId>{uuid.uuid4()}</requestId><placementGroupSet>{items}</placementGroupSet>"
                              "</DescribePlacementGroupsResponse>")

    def _on_ec2_DeletePlacementGroup(self, environ, params):
        name = params.get("GroupName")
        if name not in self.placement_groups:
            return self._xml_error("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
        if any(i.placement.group_name == name and i.state not in ("terminated",) for i in self.instances()):
            return self._xml_error("InvalidPlacementGroup.InUse", f"Placement group '{name}' is in use.")
        del self.placement_groups[name]
        return self._xml(200, '<DeletePlacementGroupResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                              f"<requestId>{uuid.uuid4()}</requestId><return>true</return></DeletePlacementGroupResponse>")

    def _on_ec2_RunInstances(self, environ, params):
        token = params.get("ClientToken")
        if token and token in self.client_tokens:
            return self.client_tokens[token]  # idempotent: the first call's reservation
        group = params.get("Placement.GroupName")
        if group and group not in self.placement_groups:
            return self._xml_error("InvalidPlacementGroup.Unknown", f"The Placement Group '{group}' is unknown.")
        efa = [k for k, v in params.items() if k.startswith("NetworkInterface.") and k.endswith(".InterfaceType")
               and v in ("efa", "efa-only")]
        if efa:
            kind = params.get("InstanceType", "m1.small")
            types = self.backend("ec2").describe_instance_types([kind])  # moto's EC2 data (dicts)
            supported = bool(types) and bool(types[0].get("NetworkInfo", {}).get("EfaSupported"))
            if not supported:
                return self._xml_error("InvalidParameterCombination",
                                       f"EFA interfaces are not supported on {kind}.")
        return None

    def _after_ec2_RunInstances(self, params, result):
        if not result[0].startswith("200"):
            return None
        ids = re.findall(r"<instanceId>(i-[0-9a-f]+)</instanceId>", result[2].decode())
        group = params.get("Placement.GroupName")
        types = {}
        for key, value in params.items():
            m = re.fullmatch(r"NetworkInterface\.(\d+)\.InterfaceType", key)
            if m:
                types[int(params.get(f"NetworkInterface.{m.group(1)}.DeviceIndex", 0))] = value
        for inst in self.instances():
            if inst.id in ids:
                if group:
                    inst.placement.group_name = group
                for index, kind in types.items():
                    if index in inst.nics:
                        inst.nics[index].interface_type = kind
        token = params.get("ClientToken")
        if token:
            self.client_tokens[token] = result
        return None

    # -- SSM ------------------------------------------------------------------------------------
    def _on_ssm_DescribeInstanceInformation(self, environ, params):
        wanted = set()
        for flt in (params.get("Filters") or []) + (params.get("InstanceInformationFilterList") or []):
            if flt.get("Key") in ("InstanceIds",) or flt.get("key") == "InstanceIds":
                wanted.update(flt.get("Values") or flt.get("valueSet") or [])
        infos = [{"InstanceId": i.id, "PingStatus": "Online", "PlatformType": "Linux", "AgentVersion": "3.3.0.0",
                  "IPAddress": i.private_ip, "ResourceType": "EC2Instance"}
                 for i in self.instances() if i.state == "running" and (not wanted or i.id in wanted)
                 and self.ssm_online]
        return self._json(200, {"InstanceInformationList": infos})

    def _after_ssm_SendCommand(self, params, result):
        if not result[0].startswith("200"):
            return None
        command_id = json.loads(result[2])["Command"]["CommandId"]
        script = "\n".join((params.get("Parameters") or {}).get("commands") or [])
        outcome = self.run_command(script)
        for command in self.commands():
            if command.command_id == command_id:
                command.status = "InProgress"
                for inv in command.invocations:
                    inv.update(Status="InProgress", StatusDetails="InProgress", ResponseCode=-1)
                    if outcome is not None:
                        inv.update(Status=outcome[0], StatusDetails=outcome[0], StandardOutputContent=outcome[1],
                                   ResponseCode=0 if outcome[0] == "Success" else 1)
        return None

    def _on_ssm_CancelCommand(self, environ, params):
        for command in self.commands():
            if command.command_id == params.get("CommandId"):
                for inv in command.invocations:
                    if inv["Status"] in ("Pending", "InProgress", "Delayed"):
                        inv.update(Status="Cancelled", StatusDetails="Cancelled", ResponseCode=-1)
                command.status = "Cancelled"
                return self._json(200, {})
        return self._json_error(400, "InvalidCommandId", "Invalid command id.")


# -- request validation with botocore's own service models ----------------------------------------
def validate_request(service: str, operation: str, params: dict, strict: bool = True) -> None:
    """Raise AssertionError unless ``params`` is a valid ``operation`` request: botocore's own
    ``ParamValidator`` (types, required members, minimums) plus what it leaves to the service and
    the model still states (maximum lengths and sizes, enums, patterns)."""
    import botocore.session
    from botocore.validate import ParamValidator
    model = botocore.session.get_session().get_service_model(service).operation_model(operation)
    report = ParamValidator().validate(params, model.input_shape)
    assert not report.has_errors(), report.generate_report()
    if not strict:  # a render's placeholders (<spec-hash>, ...) do not match the model's patterns
        return
    problems: List[str] = []
    _strict(model.input_shape, params, operation, problems)
    assert not problems, "\n".join(problems)


def _strict(shape, value, path: str, problems: List[str]) -> None:
    meta = shape.metadata
    kind = shape.type_name
    if kind == "structure":
        for name, member in shape.members.items():
            if name in value:
                _strict(member, value[name], f"{path}.{name}", problems)
    elif kind == "list":
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} items > {meta['max']}")
        for i, item in enumerate(value):
            _strict(shape.member, item, f"{path}[{i}]", problems)
    elif kind == "map":
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} entries > {meta['max']}")
        for k, v in value.items():
            _strict(shape.key, k, f"{path} key {k!r}", problems)
            _strict(shape.value, v, f"{path}[{k!r}]", problems)
    elif kind == "string":
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} characters > {meta['max']}")
        if shape.enum and value not in shape.enum:
            problems.append(f"{path}: {value!r} is not one of the model's {len(shape.enum)} values")
        pattern = meta.get("pattern")
        if pattern and "\\p" not in pattern and not re.fullmatch(pattern, value, re.S):
            problems.append(f"{path}: {value[:60]!r} does not match {pattern}")
    elif kind in ("integer", "long"):
        if "max" in meta and value > meta["max"]:
            problems.append(f"{path}: {value} > {meta['max']}")


def outputs_of(procs, timeout: float = 180) -> List[str]:
    """Every node process's combined output, once all have ended (all killed on a timeout)."""
    try:
        return [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
