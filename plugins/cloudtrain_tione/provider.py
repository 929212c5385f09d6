"""``tione``: Tencent Cloud TI-ONE task-style training (DDP, MPI/Horovod, PS-Worker, Ray).

The lifecycle calls only: ``render_request`` hands over ``render.TioneRequest`` (pure), core's
one submit pipeline (``CloudProvider.schedule``) ships the code to ``code_store`` (COS, with this
provider's credentials), fills the placeholders and calls ``_find_by_spec`` / ``_create``, which
read the typed request; ``_describe`` / ``_to_status`` / ``_stop`` / ``_log_chunks`` / ``list`` /
``outputs`` follow a task.  Every API call goes through ``sdk.TioneApi`` (the SDK's ``TioneClient``,
``tencentcloud-sdk-python-tione``, API 2021-11-11, imported on first use).  A job id is
``REGION/TASK_ID`` (or ``REGION/PROJECT/TASK_ID`` in a non-default workspace), so a handle
reaches its task from any machine.
"""
from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from cloudtrain.providers.cloud import CloudProvider, timestamp
from cloudtrain.spec.errors import BadInput
from cloudtrain.spec.job import JobSpec
from cloudtrain.transfer.objectstore import ObjectUrl
from cloudtrain.providers.provider import JobStatus, State
from cloudtrain.providers.images import Pulls
from cloudtrain.providers.request import CodeUpload, Rendered
from cloudtrain.orchestrate.failures import CAPACITY, NODE_FAILURE, PREEMPTION

from . import render as rq
from .options import TioneOptions
from .render import TioneRequest
from .sdk import TioneApi


def warn(message: str) -> None:
    print(f"cloudtrain: warning: {message}", file=sys.stderr, flush=True)


def split_id(job_id: str) -> Tuple[str, Optional[str], str]:
    parts = job_id.split("/")
    if len(parts) == 2 and all(parts):
        return parts[0], None, parts[1]
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    raise BadInput(f"tione://{job_id} is not a TI-ONE job id; expected tione://REGION/TASK_ID "
                   "(or tione://REGION/PROJECT/TASK_ID), e.g. tione://ap-shanghai/train-1234567890")


def join_id(region: str, project: Optional[str], task: str) -> str:
    return "/".join(p for p in (region, project, task) if p)


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_label(names: List[str]) -> Dict[str, str]:
    """Short labels for the pods' log lines: the part after the task's common prefix."""
    if len(names) < 2:
        return {n: "" for n in names}
    prefix = os.path.commonprefix(names)
    prefix = prefix[:prefix.rfind("-") + 1]
    return {n: f"[{n[len(prefix):] or n}] " for n in names}


class TioneProvider(CloudProvider):
    name = "tione"
    extra = "tione"
    description = "Tencent Cloud TI-ONE task-style training (DDP, MPI/Horovod, PS-Worker, Ray)"
    # find_spec of a submodule imports its parents; `cloudtrain providers` must import no SDK, so
    # the top-level package is named here and the tione module is checked on first use
    sdk_modules = ("tencentcloud",)
    Options = TioneOptions
    catalog_refresh = "cloudtrain_tione.catalog:refresh"
    platform = "tione"
    # TI-ONE takes TCR (enterprise) and CCR (personal) images, and others as a third-party ``CUSTOM``
    # image pulled over the internet (``ImageInfo``): https://cloud.tencent.com/document/api/851/75051#ImageInfo
    image_registries = Pulls("Tencent Cloud's registries, TCR and CCR (others as a CUSTOM image, pulled over the "
                             "internet)",
                             (r"[a-z0-9-]+\.tencentcloudcr\.com", r"ccr\.ccs\.tencentyun\.com"),
                             "push it to CCR (ccr.ccs.tencentyun.com/<namespace>/<image>:<tag>) or TCR",
                             "https://cloud.tencent.com/document/api/851/75051#ImageInfo")
    # Capacity and quota refusals (tencentcloud-sdk-python, ``tencentcloud/tione/v20211111/errorcodes.py``):
    # ``ResourceInsufficient``, ``ResourceInsufficient.QuotaInsufficient``, ``LimitExceeded``,
    # ``OperationDenied.BillingStatusResourceInsufficient`` (pay-as-you-go resources sold out),
    # ``OperationDenied.ResourceGroupInsufficient``
    capacity_codes = frozenset({"ResourceInsufficient", "ResourceInsufficient.QuotaInsufficient", "LimitExceeded",
                                "OperationDenied.BillingStatusResourceInsufficient",
                                "OperationDenied.ResourceGroupInsufficient"})
    # CreateTrainingTaskRequest (tencentcloud-sdk-python tione/v20211111/models.py) has no stopping
    # condition field: the controller cancels the job at max_runtime (render.py warns so).
    has_runtime_limit = False
    # DescribeTrainingTask: TrainingTaskDetail.FailureReason (tencentcloud-sdk-python
    # tione/v20211111/models.py); the resource refusals are the error codes of errorcodes.py.
    failure_words = ((r"ResourceInsufficient|BillingStatusResourceInsufficient", CAPACITY),
                     (r"[Pp]reempt|SpotReclaim", PREEMPTION),
                     (r"NodeFault|NodeLost|NodeFailure", NODE_FAILURE))

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """``DefaultCredentialProvider``'s sources, looked at offline (``sdk.offline_credentials``)."""
        from .sdk import offline_credentials
        return offline_credentials()
    # THE table: every TrainingTaskDetail.Status -> neutral state.
    states = {
        "SUBMITTING": State.PENDING,
        "PENDING": State.PENDING,
        "STARTING": State.STARTING,
        "RUNNING": State.RUNNING,
        "STOPPING": State.RUNNING,  # still running until it has stopped
        "STOPPED": State.CANCELLED,
        "SUCCEED": State.SUCCEEDED,
        "FAILED": State.FAILED,
        "SUBMIT_FAILED": State.FAILED,
    }
    status_poll = 2.0
    stopping = ("STOPPING",)  # still running until it has stopped
    page_limit = 1000  # DescribeLogs' maximum

    # why `cloudtrain stage` has nothing to upload for a job without code_store
    no_code_upload = ("this job's code is not uploaded by cloudtrain: providers.tione.code_source names code already "
                      "on COS, CFS or in the image; to have cloudtrain upload it, drop code_source and set "
                      "providers.tione.code_store: cos://BUCKETNAME-APPID/PREFIX")
    spec_hash_length = rq.SPEC_LEN  # the spec hash is a tag value: kept short

    def __init__(self, client=None, credential=None, endpoint: Optional[str] = None,
                 region: Optional[str] = None, poll: Optional[float] = None, cos_endpoint: Optional[str] = None):
        """``client``: a ready ``TioneClient`` (every region); ``credential`` / ``endpoint``
        (``http://127.0.0.1:PORT`` or a host) to build one; ``region``: for ``list``;
        ``poll``: seconds between reads while following a task; ``cos_endpoint``: where COS
        requests go (default: ``$CLOUDTRAIN_COS_ENDPOINT``, else COS's own)."""
        super().__init__(poll=poll)
        self.sdk = TioneApi(self.require_sdk, client=client, credential=credential, endpoint=endpoint)
        self._cos_endpoint = cos_endpoint
        self._region = region

    @classmethod
    def instance_rules(cls):
        from .catalog import RULES
        return RULES

    # -- what submit needs before it sends anything ---------------------------------------------
    # instance_type is not among them: resources choose the spec (render.instance_type), and
    # render.missing names it for the jobs they cannot choose one for (gpus_per_node alone)
    required = {"code_store": "cos://my-bucket-1250000000/cloudtrain", "region": "ap-shanghai"}
    required_help = {
        "code_store": rq.CODE_STORE_HELP,
        "region": "the region of the task and of its COS buckets (TENCENTCLOUD_REGION in the environment gives it too)",
    }
    # storage.inputs -> DataConfigs (USER_DATA), storage.output -> Output (cos) or an OUTPUT DataConfig
    storage_schemes = rq.STORAGE_SCHEMES

    def fallback(self, option: str, job: JobSpec, options: TioneOptions) -> bool:
        if option == "region":
            return bool(self._region or os.environ.get("TENCENTCLOUD_REGION"))
        if option == "code_store":
            return bool(options.code_source)  # code already on COS, CFS or in the image
        return False

    def preflight(self, job: JobSpec, options: TioneOptions, problems) -> None:
        super().preflight(job, options, problems)
        for field, fix in rq.missing(job, options):
            name = field.rpartition(".")[2]
            if not (field.startswith("providers.") and name in self.required):
                problems.add(self.job_error(job, tuple(field.split(".")),
                                            f"is not set; TI-ONE needs it to submit: {fix}"))

    # -- render (pure) -------------------------------------------------------------------------
    def check(self, job: JobSpec, options: TioneOptions) -> None:
        for message in rq.check(job, options):
            warn(message)

    def render_request(self, job: JobSpec, options: TioneOptions) -> TioneRequest:
        # Only a plain render gets here with settings missing (validate and submit stop at
        # preflight's errors, which name each one): say once what a submit would still need.
        needs = [field for field, _ in rq.missing(job, options)]
        if needs:
            warn(f"to submit, also set {', '.join(needs)} (cloudtrain validate says how)")
        return rq.request(job, options)

    # -- submit: core's pipeline (CloudProvider.schedule) ships the code here, then these ------
    def region_of(self, options: TioneOptions) -> Optional[str]:
        return options.region or self._region or os.environ.get("TENCENTCLOUD_REGION")

    def submit_region(self, options: TioneOptions) -> str:
        """``region_of``, which submit requires (``required``; ``fallback`` looks where this does)."""
        region = self.region_of(options)
        if not region:
            raise BadInput("providers.tione.region is not set; set it (or TENCENTCLOUD_REGION) to the region of the "
                           "task, e.g. ap-shanghai")
        return region

    def code_store(self, upload: CodeUpload):
        """A ``CosStore`` in the upload's region with this provider's credentials and COS endpoint."""
        return self.cos(upload.region)

    def _create(self, rendered: Rendered[TioneRequest], secrets: Dict[str, str], spec: str) -> str:
        request = rendered.request
        region = self.submit_region(rendered.options)
        task = self.sdk.call(region, "CreateTrainingTask", request.task(secrets), f"creating task {request.name}")
        return join_id(region, request.project, task.Id)

    def _find_by_spec(self, rendered: Rendered[TioneRequest], spec: str) -> Optional[str]:
        """The task this spec already created (same name and spec tag), if any."""
        request = rendered.request
        region, project, name = self.submit_region(rendered.options), request.project, request.name
        params = {"Filters": [{"Name": "Name", "Values": [name]}],
                  "TagFilters": [{"TagKey": rq.TAG_SPEC, "TagValues": [spec]}], "Limit": 50}
        if project:
            params["TiProjectId"] = project
        resp = self.sdk.call(region, "DescribeTrainingTasks", params, f"looking for task {name}")
        for item in resp.TrainingTaskSet or []:
            tags = {t.TagKey: t.TagValue for t in item.Tags or []}
            if item.Name == name and tags.get(rq.TAG_SPEC) == spec:
                return join_id(region, project, item.Id)
        return None

    # -- code and outputs on COS ---------------------------------------------------------------
    def cos(self, region: Optional[str]):
        """A ``CosStore`` for ``region`` with this provider's credentials and COS endpoint."""
        from .cosstore import CosStore
        return CosStore(region=region, credential=self.sdk.credential(), endpoint=self._cos_endpoint)

    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """What the task's COS output (``Output``, from ``storage.output`` / ``providers.tione.output``)
        holds, into ``dest``."""
        from cloudtrain.transfer.objectstore import download
        detail = self._describe(job_id)
        output = detail.Output
        if output is None or not output.Bucket or not output.Paths:
            mounted = [c for c in detail.DataConfigs or [] if c.DataSourceUsage == "OUTPUT"]
            where = f"on {mounted[0].DataSourceType} (mounted at {mounted[0].MappingPath})" if mounted else "nowhere"
            raise BadInput(f"{self.handle(job_id)} keeps its output {where}, not on COS, so cloudtrain cannot download "
                           "it; read it where it is, or give the next job storage.output: cos://BUCKETNAME-APPID/PATH/")
        return download(self.cos(output.Region or split_id(job_id)[0]),
                        ObjectUrl("cos", output.Bucket, output.Paths[0]), Path(dest))

    # -- follow --------------------------------------------------------------------------------
    def _describe(self, job_id: str):
        region, project, task = split_id(job_id)
        params = {"Id": task, **({"TiProjectId": project} if project else {})}
        described = self.sdk.call(region, "DescribeTrainingTask", params, f"describing {self.handle(job_id)}")
        return described.TrainingTaskDetail

    def _to_status(self, job_id: str, item) -> JobStatus:
        raw = item.Status
        message = item.FailureReason or item.Message or ""
        if raw == "STOPPED" and getattr(item, "ChargeStatus", None) == "ARREARS_STOP":
            message = message or "stopped by TI-ONE: the account is in arrears (ARREARS_STOP); top it up"
        nodes = sum(r.InstanceNum or 0 for r in item.ResourceConfigInfos or []) or None
        return JobStatus(self.handle(job_id), self.map_state(raw), raw, item.Name, message=message, nodes=nodes,
                         created_at=timestamp(item.CreateTime), started_at=timestamp(item.StartTime),
                         ended_at=timestamp(item.EndTime))

    def _stop(self, job_id: str) -> None:
        region, project, task = split_id(job_id)
        self.sdk.call(region, "StopTrainingTask", {"Id": task, **({"TiProjectId": project} if project else {})},
                  f"stopping {self.handle(job_id)}")

    def list(self) -> List[JobStatus]:
        region = self._region or self.account_option("region") or os.environ.get("TENCENTCLOUD_REGION")
        if not region:
            raise BadInput("set TENCENTCLOUD_REGION (e.g. ap-shanghai) to list TI-ONE tasks")
        out: List[JobStatus] = []
        offset = 0
        while True:
            resp = self.sdk.call(region, "DescribeTrainingTasks", {
                "TagFilters": [{"TagKey": rq.TAG_MANAGED, "TagValues": ["cloudtrain"]}],
                "Offset": offset, "Limit": 50, "Order": "DESC", "OrderField": "CreateTime"}, "listing tasks")
            items = resp.TrainingTaskSet or []
            out += [self._to_status(join_id(region, None, i.Id), i) for i in items]
            offset += len(items)
            if not items or offset >= (resp.TotalCount or 0) or offset >= 1000:
                return out

    # -- logs ----------------------------------------------------------------------------------
    def _log_chunks(self, job_id: str, detail, cursor: dict, final: bool) -> Iterator[str]:
        """New lines of every pod of the task's latest instance, by time, ``[pod] `` before each."""
        instance = detail.LatestInstanceId
        if not instance:
            return
        region, project, task = split_id(job_id)
        start = timestamp(detail.StartTime) or timestamp(detail.CreateTime)
        pods = self.sdk.call(region, "DescribeTrainingTaskPods", {"Id": task},
                         f"listing the pods of {self.handle(job_id)}").PodNames or []
        labels = pod_label(sorted(pods))
        fresh = []
        for pod in sorted(pods):
            pod_cursor = cursor.setdefault(pod, {"since": start, "seen": set()})
            fresh += [(ts, pod, msg) for ts, msg in self._pod_logs(region, project, instance, pod, pod_cursor)]
        fresh.sort(key=lambda e: (e[0] or 0.0))
        for _, pod, message in fresh:
            yield labels[pod] + message.rstrip("\n")

    def _pod_logs(self, region, project, instance, pod, cursor) -> List[Tuple[Optional[float], str]]:
        """New lines of one pod: a query from the last timestamp seen, paged with Context."""
        params = {"Service": "TRAIN", "ServiceId": instance, "PodName": pod, "Limit": self.page_limit,
                  "Order": "ASC", "OrderField": "Timestamp"}
        if project:
            params["TiProjectId"] = project
        if cursor["since"]:
            params["StartTime"] = rfc3339(cursor["since"])
        out, context = [], None
        while True:
            page = dict(params, **({"Context": context} if context else {}))
            resp = self.sdk.call(region, "DescribeLogs", page, f"reading the logs of {pod}")
            for item in resp.Content or []:
                key = item.Id or f"{item.Timestamp}/{item.Message}"
                if key in cursor["seen"]:
                    continue
                cursor["seen"].add(key)
                ts = timestamp(item.Timestamp)
                out.append((ts, item.Message or ""))
            if not resp.Content or not resp.Context or resp.Context == context:
                break
            context = resp.Context
        stamps = [ts for ts, _ in out if ts]
        if stamps:
            cursor["since"] = max(stamps + [cursor["since"] or 0])
        return out

