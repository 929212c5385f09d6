"""What the AWS providers share: ``AwsProvider`` (a ``CloudProvider``: boto3 clients with retries
and regions, error translation, the content-addressed code upload, EFA facts from EC2, one read
of CloudWatch Logs), and the request helpers (placeholders, names, secrets).

Imports no SDK at module level: ``cloudtrain render`` of any provider must not pay for boto3.
"""
from __future__ import annotations

import json
import os
import re
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from cloudtrain import __version__
from cloudtrain.cloud import CloudProvider
from cloudtrain.errors import BadInput, JobFileError, JobNotFound, MissingCredentials, PlatformError
from cloudtrain.job import JobSpec
from cloudtrain.provider import Rendered

if TYPE_CHECKING:  # annotations only: render imports no SDK
    from cloudtrain.shipping import Archive
    from boto3.session import Session
    from botocore.client import BaseClient

# Placeholders a render shows for what only submit knows (filled in by ``fill``).
SPEC_HASH = "<spec-hash>"
CODE_DIGEST = "<code-digest>"
NODE_MODULE = "cloudtrain_aws.node:main"  # shipped in the launcher bundle next to the detector
# EFA presets for libfabric / NCCL on EFA instances (SageMaker's and the AWS DLAMI's choices;
# libfabric >= 1.18 turns on device RDMA by itself where the instance has it).
EFA_ENV = {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1", "RDMAV_FORK_SAFE": "1"}
S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(/.*)?$")
TAG_JOB, TAG_NAME, TAG_HASH = "cloudtrain:job-id", "cloudtrain:name", "cloudtrain:spec-hash"

_HINTS = (
    (("AccessDenied", "UnauthorizedOperation", "AuthFailure", "AccessDeniedException"),
     "grant the calling IAM identity this permission, or use other credentials (AWS_PROFILE)"),
    (("ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
      "SignatureDoesNotMatch", "InvalidSignatureException"),
     "refresh or fix your AWS credentials (aws sso login, aws configure, AWS_PROFILE)"),
    (("ResourceLimitExceeded", "InstanceLimitExceeded", "InsufficientInstanceCapacity", "VcpuLimitExceeded",
      "MaxSpotInstanceCountExceeded"),
     "ask AWS for a quota increase, or use fewer or other instances"),
    (("ThrottlingException", "Throttling", "RequestLimitExceeded", "TooManyRequestsException", "SlowDown"),
     "try again later (cloudtrain already retried with backoff; AWS_MAX_ATTEMPTS raises the number of tries)"),
    (("NoSuchBucket",), "create the bucket or fix the s3:// option"),
    (("NoSuchEntity", "InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidSubnetID.NotFound",
      "InvalidGroup.NotFound", "InvalidKeyPair.NotFound", "InvalidParameterValue"),
     "check the option's value: it does not exist in this account and region"),
)


def hint_for(code: str) -> str:
    for codes, hint in _HINTS:
        if code in codes:
            return hint
    if code.startswith("Invalid") or code in ("ValidationException", "ValidationError", "MissingParameter"):
        return "fix the request (`cloudtrain render -p PROVIDER JOB.yaml` shows it)"
    return "see AWS's message above"


def no_region(provider: str, job: Optional[JobSpec] = None, submit: bool = False) -> BadInput:
    """No region anywhere boto3 looks.  botocore reads ``AWS_DEFAULT_REGION`` (not ``AWS_REGION``):
    botocore/configprovider.py, ``'region': ('region', 'AWS_DEFAULT_REGION', None, None)``.  The
    job-file option is named only when a job is at hand (submit: ``job`` or ``submit``), not on
    status/logs/cancel/list."""
    fix = (f"set providers.{provider}.region (or --set providers.{provider}.region=us-east-1), "
           "AWS_DEFAULT_REGION, or a profile's region (aws configure)")
    if job is not None:
        return JobFileError.at(job, ("providers", provider, "region"), f"no AWS region: {fix}")
    if submit:
        return BadInput(f"no AWS region: {fix}")
    return BadInput(f"no AWS region: export AWS_DEFAULT_REGION (e.g. us-east-1) or set a profile's region "
                    f"(aws configure), or name the region in the handle: {provider}://REGION/NAME")


def aws_credentials(session):
    """The credentials of boto3's default chain, or ``MissingCredentials`` naming where it looked
    (nothing is sent: botocore signs a request with them before sending it)."""
    credentials = session.get_credentials()
    if credentials is not None:
        return credentials
    core = getattr(session, "_session", session)  # boto3's Session wraps botocore's
    profile = session.profile_name or "default"
    files = " and ".join(os.path.expanduser(core.get_config_variable(v)) for v in ("credentials_file", "config_file"))
    metadata = ("container and EC2 instance metadata" if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower()
                != "true" else "container metadata, not EC2 instance metadata: AWS_EC2_METADATA_DISABLED=true")
    raise MissingCredentials(
        "AWS", f"AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profile {profile!r} in {files}, {metadata}",
        "run `aws configure` or `aws sso login`, set AWS_PROFILE to a profile that has them, or export "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")


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


def fill(content: Any, values: Mapping[str, str]) -> Any:
    """``content`` (JSON-able) with every placeholder replaced (a JSON round trip)."""
    text = json.dumps(content)
    for placeholder, value in values.items():
        text = text.replace(placeholder, json.dumps(value)[1:-1])
    return json.loads(text)


def artifact(rendered: Rendered, kind: str) -> Any:
    """The content of the rendered artifact of ``kind`` (the first one)."""
    return next(a.content for a in rendered.artifacts if a.kind == kind)


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


def secrets_artifact(job: JobSpec, provider: str, ids: Mapping[str, str]):
    """What every node reads from Secrets Manager at start (``cloudtrain_aws.node``): the ids,
    and the values masked; None without secrets."""
    from cloudtrain.provider import Artifact
    from cloudtrain.secrets import MASK
    if not job.secrets:
        return None
    return Artifact("secretsmanager/GetSecretValue", "node", {
        name: {"SecretId": ids.get(name) or f"<providers.{provider}.secrets_manager.{name}>", "SecretString": MASK}
        for name in sorted(job.secrets)})


def require_secret_ids(job: JobSpec, provider: str, ids: Mapping[str, str]) -> None:
    """Submit-time: every secret must come from Secrets Manager (AWS has no secret variables)."""
    missing = sorted(set(job.secrets) - set(ids))
    if missing:
        raise JobFileError.at(
            job, ("providers", provider, "secrets_manager"),
            f"{provider} has no secret environment variables and cloudtrain never puts a secret's value "
            f"in the request; store {', '.join(missing)} in AWS Secrets Manager and map it: "
            f"providers.{provider}.secrets_manager: {{{missing[0]}: arn:aws:secretsmanager:...}}")


# -- per-process caches shared by provider instances (a benchmark submits from many threads) --
_lock = threading.RLock()
_efa: Dict[tuple, Optional[dict]] = {}
_efa_locks: Dict[tuple, threading.Lock] = {}


def code_archive(job: JobSpec, targets: Iterable[str]) -> Tuple[Archive, str]:
    """The job's code with the launcher bundle (a ``shipping.Archive``: a file to upload from)
    and its sha256 (``shipping.packed``, packed once in a process)."""
    from cloudtrain import shipping
    if not job.code_path.is_dir():
        raise BadInput(f"code directory {job.code_path} does not exist; fix `code` in the job file")
    return shipping.packed(job, list(targets))


class AwsProvider(CloudProvider):
    """Base of the AWS providers (a ``CloudProvider``): clients from boto3's default credential
    chain, or injected for tests and embedding applications."""

    extra = "aws"
    sdk_modules = ("boto3",)

    def __init__(self, *, session: Optional["Session"] = None, sagemaker: Optional["BaseClient"] = None,
                 ec2: Optional["BaseClient"] = None, ssm: Optional["BaseClient"] = None,
                 s3: Optional["BaseClient"] = None, logs: Optional["BaseClient"] = None, poll: Optional[float] = None):
        """``session``: the boto3 ``Session`` clients are made from (default: boto3's default
        chain); ``sagemaker``, ``ec2``, ``ssm``, ``s3``, ``logs``: ready boto3 clients of those
        services, used in every region (tests point them at a double); ``poll``: seconds between
        reads while following a job (the AWS APIs are rate-limited)."""
        super().__init__(poll=poll)
        self._session = session
        self._injected = {name: client for name, client in
                          (("sagemaker", sagemaker), ("ec2", ec2), ("ssm", ssm), ("s3", s3), ("logs", logs))
                          if client is not None}
        self._made: Dict[tuple, Any] = {}
        self._clients_lock = threading.Lock()

    # -- what submit needs before it sends anything -------------------------------------------
    def fallback(self, option: str, job: JobSpec, options) -> bool:
        """``region`` unset: boto3's own (an injected client's, AWS_DEFAULT_REGION, the profile's)."""
        if option != "region":
            return False
        return bool(self._injected) or bool(self.session().region_name)

    # the options that hold s3:// URIs (a mapping: each of its values)
    s3_options: Tuple[str, ...] = ()

    def preflight(self, job: JobSpec, options, problems) -> None:
        super().preflight(job, options, problems)
        for option in self.s3_options:
            value = getattr(options, option, None)
            for key, uri in (value.items() if isinstance(value, dict) else [((), value)]):
                if uri is not None and not S3_URI.match(uri):
                    problems.add(self.job_error(job, ("providers", self.name, option, *((key,) if key != () else ())),
                                                f"{uri!r} is not an s3://bucket/prefix URI (a bucket name is 3-63 "
                                                "lowercase letters, digits, '.' and '-'); fix it"))
        problems.collect(require_secret_ids, job, self.name, options.secrets_manager)

    # -- clients ------------------------------------------------------------------------------
    @staticmethod
    def retry_config():
        """botocore's standard (or adaptive) retry mode: throttling, 5xx and dropped connections
        are retried with backoff (``AWS_RETRY_MODE``, ``AWS_MAX_ATTEMPTS`` change it)."""
        from botocore.config import Config
        return Config(retries={"mode": os.environ.get("AWS_RETRY_MODE") or "standard",
                               "max_attempts": int(os.environ.get("AWS_MAX_ATTEMPTS") or 8)},
                      connect_timeout=10, read_timeout=70, user_agent_extra=f"cloudtrain/{__version__}")

    def session(self):
        """The injected session, else boto3's default one (credentials and region from the default chain)."""
        if self._session is not None:
            return self._session
        boto3 = self.require_sdk("boto3")
        from botocore.exceptions import ProfileNotFound
        try:
            return boto3.session.Session()
        except ProfileNotFound as exc:
            raise BadInput(f"{exc}; fix AWS_PROFILE or the profiles in ~/.aws/config") from None

    def client(self, service: str, region: Optional[str] = None):
        if service in self._injected:
            return self._injected[service]
        key = (service, region)
        with self._clients_lock:
            if key not in self._made:
                session = self.session()
                aws_credentials(session)
                from botocore.exceptions import NoRegionError
                try:
                    self._made[key] = session.client(service, region_name=region, config=self.retry_config())
                except NoRegionError:  # submit resolves the region first (region_of): no job here
                    raise no_region(self.name) from None
            return self._made[key]

    def region_of(self, region: Optional[str], job: Optional[JobSpec] = None) -> str:
        """The region a job goes to (for its handle): the option, else boto3's default chain;
        ``job``: the job being submitted (the fix then names its option)."""
        region = region or (None if job is not None else self.account_option("region"))  # list: the config's
        if region:
            return region
        injected = next(iter(self._injected.values()), None)
        if injected is not None:
            return injected.meta.region_name
        found = self.session().region_name
        if not found:
            raise no_region(self.name, job)
        return found

    @staticmethod
    def split_id(job_id: str) -> Tuple[Optional[str], str]:
        """``region/name`` -> (region, name); a bare name uses the default region."""
        region, sep, name = job_id.rpartition("/")
        return (region or None) if sep else None, name

    @contextmanager
    def api(self, what: str, not_found: Optional[Callable[[str, str], bool]] = None, job_id: Optional[str] = None):
        """Translate boto errors into cloudtrain's: PlatformError (exit 3) with AWS's code, message
        and request id; an error ``not_found(code, message)`` recognises into JobNotFound (exit 2)."""
        from botocore.exceptions import (BotoCoreError, ClientError, ConnectionClosedError, EndpointConnectionError,
                                         NoCredentialsError, ReadTimeoutError)
        try:
            yield
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code, message = str(err.get("Code", "?")), str(err.get("Message", ""))
            if not_found is not None and not_found(code, message):
                raise JobNotFound(f"no {self.name} job {job_id!r} ({message}); cloudtrain list -p {self.name} "
                                  "shows the jobs") from None
            request_id = exc.response.get("ResponseMetadata", {}).get("RequestId")
            raise PlatformError(f"{what}: AWS refused: {code}: {message}; {hint_for(code)}",
                                request_id=request_id) from None
        except NoCredentialsError:
            aws_credentials(self.session())  # MissingCredentials: where boto3's chain looked
            raise PlatformError(f"{what}: this client has no credentials to sign with (the default chain "
                                "has some); give the client credentials") from None
        except (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError) as exc:
            raise PlatformError(f"{what}: cannot reach AWS ({exc}) after retries; check the network, the "
                                "region and AWS_ENDPOINT_URL") from None
        except BotoCoreError as exc:
            raise PlatformError(f"{what}: {exc}; check the AWS configuration") from None

    # -- code ---------------------------------------------------------------------------------
    @staticmethod
    def uses_ssh(job: JobSpec) -> bool:
        """Does node 0's mpirun/horovodrun reach the other nodes over ssh (their sshd)?"""
        return job.distribution.type in ("mpi", "horovod") and job.distribution.nodes > 1

    @staticmethod
    def code_values(job: JobSpec, spec: str, targets: Iterable[str]) -> Dict[str, str]:
        """The spec hash and the archive's sha256, for the placeholders ``fill`` replaces."""
        _, archive_sha = code_archive(job, targets)
        return {SPEC_HASH: spec, CODE_DIGEST: archive_sha}

    def upload_code(self, job: JobSpec, upload: Mapping[str, str], targets: Iterable[str], region: Optional[str]) -> None:
        """Put the archive where the filled ``s3/PutObject`` artifact says unless it is there
        already (content-addressed: the key holds the archive's sha256), once per process
        (``objectstore.upload_once``)."""
        from cloudtrain.objectstore import ObjectUrl, upload_once
        from .s3store import S3Store
        data, _ = code_archive(job, targets)
        upload_once(S3Store(self.client("s3", region)), ObjectUrl("s3", upload["Bucket"], upload["Key"]), data)

    def download(self, uri: str, dest, region: Optional[str]) -> List:
        """Every object under the ``s3://`` ``uri`` into ``dest`` (``objectstore.download``:
        paths below the prefix kept, a progress line on a terminal); the files written."""
        from pathlib import Path
        from cloudtrain.objectstore import ObjectUrl, download
        from .s3store import S3Store
        return download(S3Store(self.client("s3", region)), ObjectUrl.parse(uri), Path(dest))

    # -- EFA ----------------------------------------------------------------------------------
    def efa_info(self, instance_type: str, region: Optional[str]) -> Optional[dict]:
        """EC2's network facts for an instance type (``ml.`` dropped): ``{"supported": bool,
        "max_interfaces": n, "network_cards": n}``; None when EC2 cannot be asked (no permission).
        One DescribeInstanceTypes call per type and region in a process."""
        ec2_type = instance_type[3:] if instance_type.startswith("ml.") else instance_type
        key = (ec2_type, region)
        with _lock:
            key_lock = _efa_locks.setdefault(key, threading.Lock())
        with key_lock:  # concurrent submits ask EC2 once
            if key not in _efa:
                _efa[key] = self._ask_ec2(ec2_type, region)
            return _efa[key]

    def _ask_ec2(self, ec2_type: str, region: Optional[str]) -> Optional[dict]:
        from botocore.exceptions import ClientError
        ec2 = self.client("ec2", region)
        try:
            with self.api(f"look up {ec2_type} in EC2"):
                try:
                    found = ec2.describe_instance_types(InstanceTypes=[ec2_type])["InstanceTypes"]
                except ClientError as exc:
                    code = exc.response.get("Error", {}).get("Code", "")
                    if code in ("InvalidInstanceType", "InvalidParameterValue"):
                        found = []
                    else:
                        raise
        except PlatformError:
            return None  # e.g. no ec2:DescribeInstanceTypes permission: the caller decides
        if not found:
            return {"supported": False, "max_interfaces": 0, "network_cards": 0, "unknown": True}
        net = found[0].get("NetworkInfo", {})
        return {"supported": bool(net.get("EfaSupported")),
                "max_interfaces": int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0),
                "network_cards": int(net.get("MaximumNetworkCards") or 1)}

    def use_efa(self, job: JobSpec, instance_type: str, region: Optional[str]) -> Optional[dict]:
        """Whether the job gets EFA: ``network.rdma: off`` never; ``on`` always (exit 2 if EC2 says
        the type has no EFA); ``auto`` when EC2 says the type supports it.  Returns the EFA facts
        (None: no EFA)."""
        rdma = job.network.rdma
        if rdma == "off":
            return None
        info = self.efa_info(instance_type, region)
        if rdma == "on":
            if info is not None and not info["supported"] and not info.get("unknown"):
                raise JobFileError.at(job, ("network", "rdma"), f"{instance_type} has no EFA (EC2 DescribeInstanceTypes: "
                                      "EfaSupported false); use an EFA instance type (e.g. p4d.24xlarge, p5.48xlarge, "
                                      "trn1.32xlarge) or set network.rdma to auto or off")
            return info or {"supported": True, "max_interfaces": 1, "network_cards": 1}
        return info if info and info["supported"] else None

    # -- CloudWatch Logs ----------------------------------------------------------------------
    def cloudwatch_chunk(self, region: Optional[str], group: str, prefixes: Iterable[str], label: Callable[[str], str],
                         cursor: Dict[str, Any]) -> List[str]:
        """The events of the streams ``group/<prefix>*`` (for each of ``prefixes``) that the
        earlier calls with this ``cursor`` did not return, oldest first, each line as ``[label]
        message`` (``CloudProvider.logs`` calls it once per read; a group not made yet is empty)."""
        logs = self.client("logs", region)
        from botocore.exceptions import ClientError
        tokens: Dict[str, Optional[str]] = cursor.setdefault("tokens", {})
        batch: List[tuple] = []
        with self.api(f"read the logs of {group}"):
            streams = set()
            for prefix in prefixes:
                try:
                    for page in logs.get_paginator("describe_log_streams").paginate(
                            logGroupName=group, logStreamNamePrefix=prefix):
                        streams.update(s["logStreamName"] for s in page.get("logStreams", []))
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                        raise
            for order, stream in enumerate(sorted(streams)):
                token = tokens.get(stream)
                while True:
                    kwargs = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
                    if token:
                        kwargs["nextToken"] = token
                    page = logs.get_log_events(**kwargs)
                    for event in page.get("events", []):
                        batch.append((event.get("timestamp", 0), order, label(stream), event.get("message", "")))
                    new = page.get("nextForwardToken")
                    if not new or new == token:
                        break
                    token = new
                tokens[stream] = token
        return [f"[{name}] {line}\n" for _, _, name, message in sorted(batch, key=lambda b: (b[0], b[1]))
                for line in message.rstrip("\n").split("\n")]


def strip_empty(request: dict) -> dict:
    """Drop keys whose value is None, an empty dict or an empty list (boto3 rejects None)."""
    return {k: v for k, v in request.items() if v is not None and v != {} and v != []}

