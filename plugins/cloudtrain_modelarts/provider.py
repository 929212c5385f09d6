"""``modelarts``: ModelArts Standard training jobs (``create_training_job``, REST v2): the lifecycle.

The request is ``render.ModelartsRequest`` (built by ``render.build``); core's one pipeline
(``CloudProvider.schedule``) ships the code where the request's ``code_upload`` says (OBS, through
``code_store``: ``obsstore.ObsStore``), fills ``<code-digest>`` in and calls ``_find_by_spec``, then
``_create``, which builds the SDK's request model from the body strictly (an unknown field is an
error, before the create call) and sends it with ``ModelArtsClient``.

Code: ModelArts downloads a *directory* of OBS (``algorithm.code_dir``) into ``$MA_JOB_DIR`` and
unpacks nothing.  A submit puts the job's archive (``cloudtrain.transfer.shipping``: the code and the
launcher bundle) alone in a content-addressed directory under ``providers.modelarts.code_store``
(``<store>/cloudtrain-code/<code-digest>/code/code.tar.gz``, once: ``objectstore.upload_once``);
every node's command unpacks it, then runs ``cloudtrain launch``.  ``code_dir`` instead names code
someone staged by hand (``cloudtrain stage``).

Neutral storage: ``storage.inputs`` / ``storage.output`` (``obs://``) become ``algorithm.inputs``
/ ``algorithm.outputs`` (``access_method: env``, a fixed ``local_dir``), and the nodes get
``CLOUDTRAIN_INPUT_<NAME>`` / ``CLOUDTRAIN_OUTPUT_DIR`` pointing there; ``outputs`` downloads the
output's OBS directory.

Job ids are ``<region>/<training job id>`` so that a handle alone finds the job; logs of one
task: ``modelarts://<region>/<id>/<task>`` (e.g. ``worker-1``).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.spec.job import JobSpec
from cloudtrain.transfer.objectstore import ObjectUrl
from cloudtrain.providers.provider import JobStatus, Rendered, State
from cloudtrain.providers.images import Pulls
from cloudtrain.providers.request import CodeUpload
from cloudtrain.input.secrets import Masker

from . import catalog, render, sdk
from .detect import STANDARD
from .options import ModelartsOptions

SERVICE = "ModelArts"
TERMINAL_PHASES = ("Completed", "Failed", "Terminated", "Abnormal")


def split_id(job_id: str) -> Tuple[str, str, Optional[str]]:
    """``region/id[/task]`` -> (region, id, task)."""
    parts = job_id.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise BadInput(f"{job_id!r} is not a ModelArts job id; expected <region>/<training job id>[/<task>], "
                       "e.g. modelarts://cn-north-4/3b5c...")
    return parts[0], parts[1], (parts[2] if len(parts) == 3 else None)


class ModelartsProvider(CloudProvider):
    name = STANDARD
    extra = "modelarts"
    description = "ModelArts Standard training jobs (custom image, OBS code)"
    sdk_modules = ("huaweicloudsdkmodelarts",)
    Options = ModelartsOptions
    catalog_refresh = "cloudtrain_modelarts.catalog:refresh"
    # ModelArts Standard runs custom images "only after they are uploaded to SWR":
    # https://support.huaweicloud.com/intl/en-us/drawer-modelarts/ma_drawer_004.html
    image_registries = Pulls("Huawei Cloud SWR",
                             (r"swr\.[a-z0-9-]+\.myhuaweicloud\.(com|eu)", r"swr\.[a-z0-9-]+\.[a-z0-9.-]+"),
                             "push it to SWR (swr.<region>.myhuaweicloud.com/<organization>/<image>:<tag>)",
                             "https://support.huaweicloud.com/intl/en-us/drawer-modelarts/ma_drawer_004.html")
    # Capacity and quota refusals (API reference, Error Codes, support.huaweicloud.com/api-modelarts/
    # modelarts_03_0095): ``ModelArts.0116`` ("The expected {0} exceeds the quota limit"),
    # ``ModelArts.3976`` ("No resources are available for the selected specification")
    capacity_codes = frozenset({"ModelArts.0116", "ModelArts.3976"})
    # ModelArts' fault tolerance restarts the job itself: fault-tolerance/job-retry-num
    # (render.py, ModelArts user guide develop-modelarts-0041).
    restarts_itself = True

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """The SDK's access keys, looked at offline (``sdk.offline_credentials``)."""
        return sdk.offline_credentials()

    # ModelArts' `status.phase` (the secondary phase is shown in the message).
    states = {
        "Creating": State.PENDING,
        "Pending": State.PENDING,
        "Running": State.RUNNING,
        "Terminating": State.RUNNING,
        "Completed": State.SUCCEEDED,
        "Failed": State.FAILED,
        "Abnormal": State.FAILED,
        "Terminated": State.CANCELLED,
    }
    platform = STANDARD

    status_poll = 5.0
    stopping = ("Terminating",)
    no_code_upload = ("providers.modelarts.code_dir names code staged by hand, which cloudtrain does not upload "
                      "(set code_store instead of code_dir to have cloudtrain upload it)")

    def __init__(self, client=None, poll: Optional[float] = None):
        """``client``: a ``ModelArtsClient`` to use for every region (tests); default: one per
        region, built from the environment's credentials.  ``poll``: seconds between reads while
        following a job (ModelArts' API is rate-limited)."""
        super().__init__(poll=poll)
        self._client = client
        self._clients: Dict[str, Any] = {}
        self.project_id: Optional[str] = None  # the submitted job's option; else the environment's

    # -- what submit needs before it sends anything --------------------------------------------
    storage_schemes = ("obs",)  # storage.inputs -> algorithm.inputs, storage.output -> algorithm.outputs
    required = {"code_store": "obs://my-bucket/cloudtrain/", "flavor_id": "modelarts.vm.gpu.8v100",
                "region": "cn-north-4"}
    required_help = {
        "code_store": "ModelArts runs code from OBS: submit uploads the code (with the launcher) to this OBS "
                      "bucket and prefix (or set code_dir to code you staged there yourself)",
        "flavor_id": "a resource flavor (the console lists them; cloudtrain's catalog has none for this job's "
                     "accelerator; a job with no accelerator gets the region's smallest fitting CPU flavor at "
                     "submit), or pool_id for a dedicated pool",
        "region": f"the region of the job and of its OBS buckets ({sdk.REGION_ENV} in the environment gives it too)",
    }

    def fallback(self, option: str, job: JobSpec, options: ModelartsOptions) -> bool:
        if option == "code_store":
            return bool(options.code_dir)
        if option == "flavor_id":
            return bool(render.flavor(job, options) or options.pool_id)
        return option == "region" and bool(os.environ.get(sdk.REGION_ENV))

    def preflight(self, job: JobSpec, options: ModelartsOptions, problems) -> None:
        super().preflight(job, options, problems)
        if job.secrets and not options.secrets_in_environment:
            problems.add(self.job_error(job, ("secrets",), f"ModelArts training jobs have no secret store: "
                                        f"{', '.join(sorted(job.secrets))} would be readable by anyone who can view "
                                        "the job. Set providers.modelarts.secrets_in_environment: true to send them "
                                        "anyway, or read them in the script from a secret service"))

    # -- render (pure: render.py) ------------------------------------------------------------
    def check(self, job: JobSpec, options: ModelartsOptions) -> None:
        render.check(job, options, self.detectors_variable())

    def render_request(self, job: JobSpec, options: ModelartsOptions) -> render.ModelartsRequest:
        return render.build(job, options, self.detectors_variable())

    @classmethod
    def instance_rules(cls):
        return catalog.RULES

    # -- clients ---------------------------------------------------------------------------------
    def code_store(self, upload: CodeUpload):
        """The OBS store of the job's region (``obsstore.ObsStore``)."""
        from .obsstore import ObsStore
        return ObsStore(region=sdk.region_of(upload.region))

    def models(self):
        return sdk.require("huaweicloudsdkmodelarts.v1", self.name)

    def client(self, region: str):
        if self._client is None and region not in self._clients:
            self._clients[region] = sdk.modelarts_client(self.name, region, self.project_id)
        return self._client if self._client is not None else self._clients[region]

    def _submit_client(self, rendered: Rendered):
        """The client of the rendered job's region, with its project id, and that region."""
        self.project_id = rendered.options.project_id
        region = sdk.region_of(rendered.options.region)
        return self.client(region), region

    # -- lifecycle ---------------------------------------------------------------------------------
    def _sdk_request(self, body: dict):
        """``CreateTrainingJobRequest`` built from ``body`` strictly: a body the SDK's ``Job`` model
        does not take is refused here, before anything is created."""
        v1 = self.models()
        try:
            return v1.CreateTrainingJobRequest(body=sdk.to_model(v1, "Job", body))
        except ValueError as exc:
            raise BadInput(f"the rendered request does not fit the ModelArts SDK's Job model: {exc}") from None

    def _create(self, rendered: Rendered[render.ModelartsRequest], secrets: Dict[str, str], spec: str) -> str:
        body = render.submitted_body(rendered.request, secrets, spec)
        if render.chosen_at_submit(body["spec"]["resource"].get("flavor_id")):
            body["spec"]["resource"]["flavor_id"] = self.cpu_flavor(rendered.job, *self._submit_client(rendered))
        request = self._sdk_request(body)
        client, region = self._submit_client(rendered)
        masker = Masker(secrets.values())
        try:
            with sdk.api_errors(SERVICE, "create_training_job"):
                response = client.create_training_job(request)
        except PlatformError as exc:
            exc.args = (masker(str(exc)),)  # the service may quote a value back; keeps the request id
            raise
        return f"{region}/{response.metadata.id}"

    def cpu_flavor(self, job: JobSpec, client, region: str) -> str:
        """A job that asks for no accelerator and names no flavor: the region's smallest CPU
        training flavor with its ``cpus_per_node`` and ``memory_gb`` for its nodes (the render
        shows ``<chosen at submit: ...>``); exit 2 naming what the region offers when none fits."""
        r, nodes = job.resources, job.distribution.nodes
        with sdk.api_errors(SERVICE, "show_training_job_flavors"):
            offered = catalog.cpu_flavors(client)
        if not offered:
            raise PlatformError(f"ModelArts lists no CPU training flavor in {region} (ShowTrainingJobFlavors, "
                                "flavor_type CPU); set providers.modelarts.flavor_id or pool_id")
        best = catalog.smallest_cpu_flavor(offered, r.cpus_per_node, r.memory_gb, nodes)
        wants = catalog.size_text(r.cpus_per_node, r.memory_gb)
        if best is None:
            loc = ("resources", "cpus_per_node") if r.cpus_per_node else \
                ("resources", "memory_gb") if r.memory_gb else ("distribution", "nodes")
            raise self.job_error(job, loc, f"no ModelArts CPU training flavor in {region} gives {wants} on {nodes} "
                                           f"node(s); the region offers {', '.join(map(str, offered))}; lower the "
                                           "minimums, or set providers.modelarts.flavor_id")
        print(f"cloudtrain: modelarts: flavor {best.flavor_id} ({best.vcpus:g} vCPUs, {best.memory_gb:g} GB) for "
              f"{wants}", file=sys.stderr, flush=True)
        return best.flavor_id

    def _find_by_spec(self, rendered: Rendered[render.ModelartsRequest], spec: str) -> Optional[str]:
        """The job with this spec-hash name (an earlier submit of the same request)."""
        name = render.submitted_body(rendered.request, {}, spec)["metadata"]["name"]
        client, region = self._submit_client(rendered)
        v1 = self.models()
        search = v1.JobSearches(offset=0, limit=50, filters=[v1.Filter(key="name", operator="like", value=[name])])
        if rendered.options.workspace_id:
            search.workspace_id = rendered.options.workspace_id
        with sdk.api_errors(SERVICE, "list_training_jobs"):
            response = client.list_training_jobs(v1.ListTrainingJobsRequest(body=search))
        for item in response.items or []:
            meta = item.metadata
            if meta and meta.name == name and render.spec_of(meta.description) == spec:
                return f"{region}/{meta.id}"
        return None

    def _describe(self, job_id: str):
        region, training_id, _ = split_id(job_id)
        v1 = self.models()
        with sdk.api_errors(SERVICE, f"show_training_job_details of {training_id}"):
            return self.client(region).show_training_job_details(
                v1.ShowTrainingJobDetailsRequest(training_job_id=training_id))

    def _to_status(self, handle_id: str, job) -> JobStatus:
        st = job.status
        phase = st.phase if st else None
        secondary = st.secondary_phase if st else None
        raw = phase if not secondary or secondary == phase else f"{phase}/{secondary}"
        message = ""
        exit_code = None
        for ts in (st.task_statuses or []) if st else []:
            if ts.exit_code not in (None, 0):
                exit_code = ts.exit_code
                message = f"{ts.task} exited with {ts.exit_code}" + (f": {ts.message}" if ts.message else "")
                break
        if not message and secondary and secondary != phase:
            message = secondary
        meta = job.metadata
        created = meta.create_time / 1000.0 if meta and meta.create_time else None
        started = st.start_time / 1000.0 if st and st.start_time else None
        ended = None
        if started is not None and st.duration and phase in TERMINAL_PHASES:
            ended = started + st.duration / 1000.0
        nodes = job.spec.resource.node_count if job.spec and job.spec.resource else None
        return JobStatus(self.handle(handle_id), self.map_state(phase), raw_state=raw,
                         name=meta.name if meta else None, message=message, nodes=nodes,
                         exit_code=exit_code, created_at=created, started_at=started, ended_at=ended)

    def _stop(self, job_id: str) -> None:
        region, training_id, _ = split_id(job_id)
        v1 = self.models()
        with sdk.api_errors(SERVICE, f"stop_training_job of {training_id}"):
            self.client(region).stop_training_job(v1.StopTrainingJobRequest(
                training_job_id=training_id, body=v1.JobActionType(action_type="terminate")))

    def list(self) -> List[JobStatus]:
        region = sdk.region_of(self.account_option("region"))  # the config's, else the environment's
        v1 = self.models()
        search = v1.JobSearches(offset=0, limit=50, sort_by="create_time", order="desc")
        with sdk.api_errors(SERVICE, "list_training_jobs"):
            response = self.client(region).list_training_jobs(v1.ListTrainingJobsRequest(body=search))
        out = []
        for item in response.items or []:
            if item.metadata and render.spec_of(item.metadata.description) is not None:
                out.append(self._to_status(f"{region}/{item.metadata.id}", item))
        return out

    # -- outputs ---------------------------------------------------------------------------------
    def outputs(self, job_id: str, dest) -> List[Path]:
        """Every object under the job's ``cloudtrain_output`` channel (storage.output's OBS
        directory, which ModelArts fills from CLOUDTRAIN_OUTPUT_DIR) into ``dest``."""
        from cloudtrain.transfer.objectstore import download

        from .obsstore import ObsStore
        region, training_id, _ = split_id(job_id)
        algorithm = self._describe(job_id).algorithm
        found = [o for o in (algorithm.outputs if algorithm else None) or [] if o.name == render.OUTPUT_CHANNEL]
        obs_url = found[0].remote.obs.obs_url if found and found[0].remote and found[0].remote.obs else None
        if not obs_url:
            raise BadInput(f"the ModelArts job {training_id} has no storage.output (no {render.OUTPUT_CHANNEL!r} "
                           "output); give the job storage.output: obs://bucket/dir/ to collect what it writes to "
                           "CLOUDTRAIN_OUTPUT_DIR")
        bucket, _, key = obs_url.lstrip("/").partition("/")
        return download(ObsStore(region=region), ObjectUrl("obs", bucket, key), Path(dest))

    # -- logs ------------------------------------------------------------------------------------
    def _preview(self, region: str, training_id: str, task: str):
        v1 = self.models()
        with sdk.api_errors(SERVICE, f"show_training_job_logs_preview of {training_id}/{task}"):
            return self.client(region).show_training_job_logs_preview(
                v1.ShowTrainingJobLogsPreviewRequest(training_job_id=training_id, task_id=task))

    def _log_chunks(self, job_id: str, job, cursor: dict, final: bool) -> Iterator[str]:
        """Each task's new log lines (``[worker-i] `` before every line when the job has several
        tasks), from its log preview, which holds the last 5 MB."""
        region, training_id, only = split_id(job_id)
        seen, pending = cursor.setdefault("seen", {}), cursor.setdefault("pending", {})
        tasks = [only] if only else list((job.status.tasks if job.status else None) or [])
        prefix = {t: (f"[{t}] " if len(tasks) > 1 else "") for t in tasks}
        for task in tasks:
            new = self._new_text(region, training_id, task, seen)
            *complete, pending[task] = (pending.get(task, "") + new).split("\n")
            for line in complete:
                yield prefix[task] + line + "\n"
        if final:
            for task in tasks:
                if pending.get(task):
                    yield prefix[task] + pending[task] + "\n"

    def _new_text(self, region: str, training_id: str, task: str, seen: Dict[str, int]) -> str:
        """What a task logged since the last call (``seen``: bytes already shown per task)."""
        preview = self._preview(region, training_id, task)
        data = (preview.content or "").encode("utf-8")
        full = preview.full_size if preview.full_size is not None else len(data)
        new = full - seen.get(task, 0)
        if new <= 0:
            return ""
        seen[task] = full
        if new <= len(data):
            return data[len(data) - new:].decode("utf-8", errors="replace")
        return (f"[cloudtrain] ... {new - len(data)} bytes skipped (a log preview holds the last 5 MB)\n"
                + data.decode("utf-8", errors="replace"))
