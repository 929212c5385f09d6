"""What the AWS providers share: ``AwsProvider``, the ``CloudProvider`` base of ``sagemaker`` and
``ec2`` (its clients and error translator from ``sdk.AwsClients``; regions and handles, the
options' checks before a submit, the code archive's store, EFA facts from EC2, one read of
CloudWatch Logs).

Imports no SDK at module level: ``cloudtrain render`` of any provider must not pay for boto3.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple

from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.spec.errors import JobFileError, PlatformError
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.request import CodeUpload

from .render import S3_URI, require_secret_ids
from .sdk import AwsClients, aws_credentials, no_region  # noqa: F401  (eks imports aws_credentials from here)

if TYPE_CHECKING:  # annotations only: render imports no SDK
    from boto3.session import Session
    from botocore.client import BaseClient


# -- per-process caches shared by provider instances (a benchmark submits from many threads) --
_lock = threading.RLock()
_efa: Dict[tuple, Optional[dict]] = {}
_efa_locks: Dict[tuple, threading.Lock] = {}


class AwsProvider(AwsClients, CloudProvider):
    """Base of the AWS providers (a ``CloudProvider``): clients from boto3's default credential
    chain, or injected for tests and embedding applications."""

    extra = "aws"
    sdk_modules = ("boto3",)

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """boto3's default chain, looked at offline (``sdk.offline_credentials``)."""
        from .sdk import offline_credentials
        return offline_credentials()

    def __init__(self, *, session: Optional["Session"] = None, sagemaker: Optional["BaseClient"] = None,
                 ec2: Optional["BaseClient"] = None, ssm: Optional["BaseClient"] = None,
                 s3: Optional["BaseClient"] = None, logs: Optional["BaseClient"] = None, poll: Optional[float] = None):
        """``session``: the boto3 ``Session`` clients are made from (default: boto3's default
        chain); ``sagemaker``, ``ec2``, ``ssm``, ``s3``, ``logs``: ready boto3 clients of those
        services, used in every region (tests point them at a double); ``poll``: seconds between
        reads while following a job (the AWS APIs are rate-limited)."""
        super().__init__(poll=poll)
        self._init_clients(session, {"sagemaker": sagemaker, "ec2": ec2, "ssm": ssm, "s3": s3, "logs": logs})

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

    # -- code ---------------------------------------------------------------------------------
    def code_store(self, upload: CodeUpload):
        """The S3 store on this provider's own s3 client (the upload's region): what core's
        ``ship`` puts the code archive in."""
        from .s3store import S3Store
        return S3Store(self.client("s3", upload.region))

    def download(self, uri: str, dest, region: Optional[str]) -> List:
        """Every object under the ``s3://`` ``uri`` into ``dest`` (``objectstore.download``:
        paths below the prefix kept, a progress line on a terminal); the files written."""
        from pathlib import Path
        from cloudtrain.transfer.objectstore import ObjectUrl, download
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
                raise JobFileError.at(job, ("network", "rdma"),
                                      f"{instance_type} has no EFA (EC2 DescribeInstanceTypes: "
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
            streams: set = set()
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
