"""What a tione submit sends for a job: ``TioneRequest`` (the typed request) and its builders.

Pure: no network, no clock, no credentials, no SDK import.  ``request`` builds the
``TioneRequest``: the code archive's upload (``cos/PutObject``) and the ``CreateTrainingTask``
body as the TI-ONE SDK's request model takes it (``models.CreateTrainingTaskRequest()
._deserialize(request.task())`` loads it without a warning), its placeholders
(``cloudtrain.providers.request.Placeholder``) filled in at submit by core's ``fill``; ``check`` raises
``JobFileError`` for what TI-ONE would refuse or run wrongly and returns warnings; ``missing``
lists what a submit still needs.
"""
from __future__ import annotations

import base64
import copy
import json
import re
import shlex
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

from cloudtrain.transfer import storage
from cloudtrain.spec.errors import BadInput, JobFileError
from cloudtrain.catalogs.instances import check_minimums, choose, smallest_cpu, wanted
from cloudtrain.spec.job import JobSpec
from cloudtrain.launch.unpack import bootstrap_argv
from cloudtrain.input.loading import validate_model
from cloudtrain.transfer.objectstore import CODE_FOLDER, ObjectUrl
from cloudtrain.providers.request import Artifact, CodeUpload, Placeholder, Request, ShellText
from cloudtrain.input.secrets import MASK
from cloudtrain.transfer.shipping import LAUNCHER_DIR, launch_argv

from . import catalog
from .detect import NCCL_PRESET, NODES_VAR, PLATFORMS, PORT_VAR, PS_PORT, RDMA_VAR
from .options import TioneOptions

PROVIDER = "tione"
CODE_UPLOAD, CREATE_TASK = "cos/PutObject", "tione/CreateTrainingTask"  # what a render prints, in order
NAME_MAX = 60  # TI-ONE task names: at most 60 characters
SPEC_LEN = 16
TAG_MANAGED, TAG_JOB, TAG_SPEC = "managed-by", "cloudtrain-job", "cloudtrain-spec"
MAX_DATA_CONFIGS = 10
TRAINING_MODES = {"ddp": "DDP", "deepspeed": "DDP", "none": "DDP", "mpi": "MPI", "horovod": "HOROVOD",
                  "ps-worker": "PS_WORKER", "ray": "RAY"}
SOURCE_TYPES = {"cos": "COS", "cfs": "CFS", "cfsturbo": "CFSTurbo", "goosefsx": "GooseFSx", "dataset": "DATASET"}
# the schemes of storage.inputs / storage.output (a dataset is read-only and has no path: not neutral)
STORAGE_SCHEMES = ("cos", "cfs", "cfsturbo", "goosefsx")
QUOTES = set("'\"`\\\n")
CHECKPOINT_DIR = "/opt/ml/checkpoint"  # where storage.checkpoint is mounted read-write (CLOUDTRAIN_CHECKPOINT_DIR)
INPUT_DIR = "/opt/ml/input/data"  # storage.inputs.<name> is mounted at INPUT_DIR/<name> (CLOUDTRAIN_INPUT_<NAME>)
# COS bucket names are BUCKETNAME-APPID (the APPID: the account's digits), e.g. train-1250000000
COS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]*-[0-9]+$")


def task_name(job: JobSpec, spec: str = Placeholder.SPEC_HASH) -> str:
    return f"{job.name[:NAME_MAX - SPEC_LEN - 1]}-{spec}"


def training_mode(job: JobSpec, options: TioneOptions) -> str:
    return options.training_mode or TRAINING_MODES[job.distribution.type]


def roles(job: JobSpec) -> List[Tuple[str, int]]:
    """(Role, InstanceNum) of every resource config."""
    kind, nodes = job.distribution.type, job.distribution.nodes
    if kind == "ps-worker":
        return [("PS", job.ps), ("WORKER", nodes - job.ps)]
    if kind == "ray":
        return [("HEAD", 1)] + ([("WORKER", nodes - 1)] if nodes > 1 else [])
    return [("WORKER", nodes)]


def instance_type(job: JobSpec, options: TioneOptions) -> Optional[str]:
    """The postpaid spec (None with a resource group): ``providers.tione.instance_type`` (checked
    against the job's resources when the catalog lists it), else resolved from ``resources``
    through the catalog (``cloudtrain.catalogs.instances``: another platform's instance type is translated,
    never sent raw); a job without accelerators gets the smallest CPU spec with its
    ``cpus_per_node`` and ``memory_gb``, as SageMaker and EC2 choose one."""
    if options.resource_group:
        return None
    choice = choose(job, catalog.RULES, options.instance_type)
    if options.instance_type:
        check_minimums(job, catalog.RULES, choice, opt("instance_type"))
    choice = choice or smallest_cpu(job, catalog.RULES)
    return choice.instance_type if choice else None


def spec_row(job: JobSpec, options: TioneOptions):
    """The catalog row of the postpaid spec (None: a resource group, or a spec the catalog lacks)."""
    name = instance_type(job, options)
    return catalog.tione_catalog().get(name) if name else None


def gpus_per_node(job: JobSpec, options: TioneOptions) -> float:
    """GPUs of every node: ``providers.tione.gpus``, ``resources.gpus_per_node``, else what the
    named instance type (resource group) or the postpaid spec's row has."""
    if options.gpus is not None:
        return options.gpus
    if job.resources.gpus_per_node:
        return float(job.resources.gpus_per_node)
    if options.resource_group:
        found = wanted(job, catalog.RULES)
        return float(found[1]) if found else 0.0
    row = spec_row(job, options)
    return float(row.count) if row else 0.0


# The cards a resource group's GpuType names, as the SDK's ResourceConf.GpuType documents them
# (tencentcloud-sdk-python-tione 3.1.191, tione/v20211111/models.py: "GpuType 卡类型，参考资源组上
# 对应的卡类型。eg: H800,A800,A100,T4,P4,V100等 (for预付费)"; "eg ... 等" is "e.g. ... and others",
# so providers.tione.gpu_type takes any name the group shows).  H800, A800 and P4 have no neutral
# name (cloudtrain.spec.accelerators), so they are reached through providers.tione.gpu_type.
SDK_GPU_TYPES = ("H800", "A800", "A100", "T4", "P4", "V100")


def gpu_type(job: JobSpec, options: TioneOptions) -> Optional[str]:
    """A resource group's GpuType: ``providers.tione.gpu_type``, else the job's accelerator in
    TI-ONE's names (catalog.GPU_TYPES); exit 2 for an accelerator TI-ONE has no GpuType for."""
    found = wanted(job, catalog.RULES)
    accelerator = found[0] if found else None
    name = catalog.gpu_type(accelerator) if accelerator else None
    if options.gpu_type:
        if name and name.upper() != options.gpu_type.upper():  # e.g. the account's V100 for an A100 job
            raise job_error(job, opt("gpu_type"), f"is {options.gpu_type}, but the job asks for {accelerator} "
                                                  f"(resources), which TI-ONE calls {name}; make them agree, or drop "
                                                  "gpu_type")
        return options.gpu_type
    if found is None:
        return None
    if name is None:
        loc = ("resources", "accelerator") if job.resources.accelerator else ("resources", "instance_type")
        raise job_error(job, loc, f"TI-ONE documents no GpuType for {found[0]} (the SDK names "
                                  f"{', '.join(SDK_GPU_TYPES)}); set providers.tione.gpu_type to the card type "
                                  "your resource group shows")
    return name


def require_gpu_type(job: JobSpec, options: TioneOptions) -> None:
    """A resource group's node with GPUs needs its GpuType (ResourceConf.GpuType: the card type
    of the group; Gpu alone counts hundredths of an unnamed card): exit 2 when none is known."""
    if not options.resource_group or not gpus_per_node(job, options) or gpu_type(job, options):
        return
    loc = opt("gpus") if options.gpus is not None else ("resources", "gpus_per_node")
    raise job_error(job, loc, f"a resource group's GPUs need their card type (TI-ONE's GpuType, e.g. "
                              f"{', '.join(SDK_GPU_TYPES)}); set resources.accelerator, or "
                              "providers.tione.gpu_type to the card type your resource group shows")


# -- errors at the job file's lines -----------------------------------------------------------
# core's: at the ``--set``, the settings file's line or the job file's line that gave ``loc``
job_error = JobFileError.at


def opt(*loc) -> tuple:
    return ("providers", PROVIDER) + loc


# -- storage ---------------------------------------------------------------------------------
def parse_source(job: JobSpec, options: TioneOptions, value: str, loc: tuple) -> Tuple[str, dict]:
    """``cos://bucket/path`` and friends -> (DataSourceType, {"<X>Source": {...}})."""
    scheme, sep, rest = value.partition("://")
    kind = SOURCE_TYPES.get(scheme.lower()) if sep else None
    first, _, path = rest.partition("/")
    if kind is None or not first:
        raise job_error(job, loc, f"{value!r} is not a storage URL; use cos://BUCKET/PATH, cfs://FS_ID/PATH, "
                                  "cfsturbo://ID/PATH, goosefsx://ID/PATH or dataset://DATASET_ID")
    if kind == "COS":
        if not options.region:
            raise job_error(job, opt("region"), f"COS paths ({value}) need the bucket's region; set "
                                                "providers.tione.region, e.g. ap-shanghai")
        return kind, {"COSSource": {"Bucket": first, "Region": options.region, "Paths": [path]}}
    if kind == "DATASET":
        if path:
            raise job_error(job, loc, f"{value!r}: a dataset is dataset://DATASET_ID, without a path")
        return kind, {"DataSetSource": {"Id": first}}
    path = "/" + path
    if kind == "CFS":
        return kind, {"CFSSource": {"Id": first, "Path": path}}
    if kind == "CFSTurbo":
        return kind, {"CFSTurboSource": {"Id": first, "Path": path}}
    return kind, {"GooseFSSource": {"Id": first, "Type": "GooseFSx", "Path": path}}


def code_upload(job: JobSpec, options: TioneOptions) -> Optional[dict]:
    """The ``cos/PutObject`` of the code archive (``code_store`` without ``code_source``): Bucket,
    Key (``<prefix>/cloudtrain-code/<code-digest>.tar.gz``, as ``objectstore.code_url``), Region."""
    if options.code_source or not options.code_store or job.code is None:
        return None
    try:
        prefix = ObjectUrl.parse(options.code_store, "providers.tione.code_store")
    except BadInput as exc:
        raise job_error(job, opt("code_store"), str(exc)) from None
    if prefix.scheme != "cos" or not COS_BUCKET.match(prefix.bucket):
        raise job_error(job, opt("code_store"), f"{options.code_store!r} is not a COS URL; give "
                                                "cos://BUCKETNAME-APPID/PREFIX, e.g. cos://train-1250000000/cloudtrain")
    key = prefix.child(CODE_FOLDER, f"{Placeholder.CODE_DIGEST}.tar.gz").key
    _, source = parse_source(job, options, f"cos://{prefix.bucket}/{key}", opt("code_store"))
    return {"Bucket": prefix.bucket, "Key": key, "Region": source["COSSource"]["Region"],
            "ContentType": "application/gzip"}


def output_uri(job: JobSpec, options: TioneOptions) -> Tuple[Optional[str], tuple]:
    """Where the output goes (``storage.output``, else ``providers.tione.output``) and the place
    that said it; the two saying different places is refused at ``storage.output``."""
    neutral = job.storage.output
    if neutral and options.output and neutral.rstrip("/") != options.output.rstrip("/"):
        raise job_error(job, ("storage", "output"), f"is {neutral} but providers.tione.output is {options.output}; "
                                                    "keep one of them")
    if neutral:
        return neutral, ("storage", "output")
    return options.output, opt("output")


def input_path(name: str) -> str:
    return f"{INPUT_DIR}/{name}"


def data_configs(job: JobSpec, options: TioneOptions) -> List[dict]:
    configs = []
    if options.code_source and options.code_source != "image":
        kind, source = parse_source(job, options, options.code_source, opt("code_source"))
        if kind == "DATASET":
            raise job_error(job, opt("code_source"), "code cannot come from a dataset; use cos://, cfs://, "
                                                     "cfsturbo://, goosefsx:// or image")
        configs.append({"MappingPath": options.code_dir, "DataSourceUsage": "USER_CODE", "DataSourceType": kind,
                        **source})
    for name, uri in sorted(job.storage.inputs.items()):
        if storage.scheme(uri) not in STORAGE_SCHEMES:
            continue  # refused at its line by Provider.validate (cloudtrain.transfer.storage.problems)
        kind, source = parse_source(job, options, uri, ("storage", "inputs", name))
        configs.append({"MappingPath": input_path(name), "DataSourceUsage": "USER_DATA", "DataSourceType": kind,
                        **source, "ReadOnly": True})
    for i, mount in enumerate(options.data):
        kind, source = parse_source(job, options, mount.source, opt("data", i, "source"))
        configs.append({"MappingPath": mount.path, "DataSourceUsage": "USER_DATA", "DataSourceType": kind,
                        **source, "ReadOnly": mount.read_only})
    output, where = output_uri(job, options)
    if output and where[0] == "storage" and storage.scheme(output) not in STORAGE_SCHEMES:
        output = None  # refused at its line by Provider.validate
    if output and not output.lower().startswith("cos://"):
        kind, source = parse_source(job, options, output, where)
        if kind == "DATASET":
            raise job_error(job, where, "output cannot go to a dataset; use cos://, cfs://, cfsturbo:// or goosefsx://")
        configs.append({"MappingPath": options.output_dir, "DataSourceUsage": "OUTPUT", "DataSourceType": kind,
                        **source, "ReadOnly": False})
    if job.storage.checkpoint:
        kind, source = parse_source(job, options, job.storage.checkpoint, ("storage", "checkpoint"))
        if kind == "DATASET":
            raise job_error(job, ("storage", "checkpoint"), "checkpoints cannot go to a dataset; use cos://, cfs://, "
                                                            "cfsturbo:// or goosefsx://")
        configs.append({"MappingPath": CHECKPOINT_DIR, "DataSourceUsage": "OTHER", "DataSourceType": kind,
                        **source, "ReadOnly": False})
    if len(configs) > MAX_DATA_CONFIGS:
        raise job_error(job, opt("data"), f"TI-ONE takes at most {MAX_DATA_CONFIGS} data configs (code, data and "
                                          f"output together), this job has {len(configs)}; merge some mounts")
    return configs


def output_path(job: JobSpec, options: TioneOptions) -> Optional[dict]:
    output, where = output_uri(job, options)
    if not output or not output.lower().startswith("cos://"):
        return None
    _, source = parse_source(job, options, output, where)
    return source["COSSource"]


# -- image -------------------------------------------------------------------------------------
def registry_type(image: str) -> str:
    host = image.split("/", 1)[0] if "/" in image else ""
    if host.endswith(".tencentcloudcr.com"):
        return "TCR"
    if host == "ccr.ccs.tencentyun.com":
        return "CCR"
    return "CUSTOM"


def image_info(job: JobSpec, options: TioneOptions) -> Optional[dict]:
    image = options.image or job.image
    if not image or options.framework:
        return None
    kind = options.image_type or registry_type(image)
    info: Dict[str, Optional[str]] = {"ImageType": kind, "ImageUrl": image}
    if kind == "TCR":
        info["RegistryRegion"] = options.registry_region or options.region
        info["RegistryId"] = options.registry_id
        info = {k: v for k, v in info.items() if v is not None}
    return info


# -- RDMA --------------------------------------------------------------------------------------
def is_hcc(job: JobSpec, options: TioneOptions) -> bool:
    """HCC machines (RDMA NICs): ``providers.tione.hcc``, else the catalog row's RoCE fact, else
    'HCC' in a spec name the catalog lacks."""
    if options.hcc is not None:
        return options.hcc
    row = spec_row(job, options)
    if row is not None:
        return row.roce
    return "HCC" in (instance_type(job, options) or "").upper()


# Why RDMA is a resource-group feature here: TI-ONE's distributed-training guide (its RDMA
# section) puts "a resource group holding at least 2 RDMA-capable high-performance GPU nodes" first among RDMA's
# prerequisites, and the SDK's ResourceConfigInfo.InstanceType lists the pay-as-you-go
# ("for后付费") specs -- TI.S.*, TI.GN10 (V100), TI.GN7 (T4) -- none of them RDMA-capable.
# Neither the API reference nor the SDK model (RDMAConfig.Enable: "是否开启RDMA") says that
# RDMAConfig is honoured with ChargeType POSTPAID_BY_HOUR, so cloudtrain never sends it there.
POSTPAID_RDMA = ("TI-ONE gives RDMA to a resource group (prepaid) holding at least 2 RDMA-capable 8-GPU nodes "
                 "(its RDMA guide's first prerequisite); pay-as-you-go instances (instance_type) list no RDMA "
                 "type and the API does not document RDMAConfig for them")


def rdma_setting(job: JobSpec, options: TioneOptions) -> Optional[bool]:
    """RDMAConfig.Enable for every resource config (None: leave it out of the request)."""
    if not options.resource_group:
        return None  # POSTPAID_RDMA
    eligible = job.distribution.nodes >= 2 and gpus_per_node(job, options) == 8
    mode = job.network.rdma
    if mode == "on":
        return True
    if mode == "off":
        return False if eligible else None
    return True if eligible and is_hcc(job, options) else None


# -- the start command -------------------------------------------------------------------------
def start_line(job: JobSpec, options: TioneOptions, launch_type: Optional[str] = None) -> str:
    """``cd CODE && PYTHONPATH=CODE/.cloudtrain... python3 -m cloudtrain.launch --platform tione ...``
    (no quotes unless the job's command needs them).  With ``code_store``, the code arrives as
    the archive ``CodePackagePath`` names: first unpack it (UNPACK)."""
    if launch_type is not None:
        job = job.model_copy(update={"distribution": job.distribution.model_copy(update={"type": launch_type})})
    code = options.code_dir.rstrip("/") or "/"
    argv = launch_argv(job, platform=PROVIDER, python=options.python)
    if code_upload(job, options) is not None:
        q = '"'  # the bootstrap has quotes anyway; "$d" keeps shellcheck's SC2086 quiet
        d = f"{q}$d{q}"
        return (UNPACK.format(code=shlex.quote(code), bundle=LAUNCHER_DIR, q=q, check=unpack_check(options)) +
                f"cd {d} && PYTHONPATH={d}/{LAUNCHER_DIR}${{PYTHONPATH:+:$PYTHONPATH}} {shlex.join(argv)}")
    bundle = shlex.quote(f"{code}/{LAUNCHER_DIR}")
    return f"cd {shlex.quote(code)} && PYTHONPATH={bundle}${{PYTHONPATH:+:$PYTHONPATH}} {shlex.join(argv)}"


# The code package (CodePackagePath, "COS代码包路径" in the SDK model) is cloudtrain's gzip'd tar.
# Where TI-ONE puts it is code_dir (its guide's /opt/ml/code); whether it unpacks the archive
# there is not documented, so the command takes both: code_dir holding the launcher bundle is
# the code TI-ONE unpacked; otherwise each archive there must have the sha256 of the one
# submitted (Placeholder.CODE_DIGEST, filled in at submit) and is unpacked by cloudtrain's own unpacker
# (unpack.BOOTSTRAP) into a fresh directory.
UNPACK = ("d={code}; if [ ! -d {q}$d/{bundle}{q} ]; then w=$(mktemp -d) || exit 1; "
          "for a in {q}$d{q}/*.tar.gz; do {check} \"$a\" \"$w\" || exit 1; done; d=$w; fi; ")


def unpack_check(options: TioneOptions) -> str:
    """``python -c BOOTSTRAP --sha256 <code-digest>`` (the archive and DEST follow)."""
    return shlex.join(bootstrap_argv(options.python, Placeholder.CODE_DIGEST, "", "")[:-2])


def start_commands(job: JobSpec, options: TioneOptions) -> Dict[str, str]:
    """StartCmd, or PsStartCmd + WorkerStartCmd for PS-Worker.

    Ray: TI-ONE starts the Ray cluster itself and runs the command on the head only, so the head
    runs the command through ``cloudtrain launch --type none`` (``RAY_ADDRESS`` is the head's).
    """
    kind = job.distribution.type
    if kind == "ps-worker":
        line = start_line(job, options)
        return {"StartCmd": "", "PsStartCmd": line, "WorkerStartCmd": line}
    return {"StartCmd": start_line(job, options, "none" if kind == "ray" else None)}


def command_fields(cmds: Mapping[str, str]) -> dict:
    """The start commands as CreateTrainingTask takes them: ``StartCmdInfo``, or base64'd JSON in
    ``EncodedStartCmdInfo`` when a command holds quotes (plain strings either way)."""
    if any(QUOTES & set(c) for c in cmds.values()):
        full = {"StartCmd": cmds.get("StartCmd", ""), "PsStartCmd": cmds.get("PsStartCmd", ""),
                "WorkerStartCmd": cmds.get("WorkerStartCmd", "")}
        full = {k: str(v) for k, v in full.items()}
        raw = json.dumps(full, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return {"EncodedStartCmdInfo": {"StartCmdInfo": base64.b64encode(raw).decode("ascii")}}
    return {"StartCmdInfo": {k: str(v) for k, v in cmds.items()}}


def decode_start_commands(request: dict) -> Dict[str, str]:
    """The start commands of a request, decoded if they are in EncodedStartCmdInfo."""
    encoded = (request.get("EncodedStartCmdInfo") or {}).get("StartCmdInfo")
    if encoded:
        return json.loads(base64.b64decode(encoded).decode("utf-8"))
    return dict(request.get("StartCmdInfo") or {})


# -- environment -------------------------------------------------------------------------------
def envs(job: JobSpec, options: TioneOptions, rdma: Optional[bool]) -> List[dict]:
    """The job's env, its secrets as private variables (``***`` until submit), then cloudtrain's."""
    out: List[dict] = [{"Name": k, "Value": v} for k, v in job.env.items()]
    out += [{"Name": k, "Value": MASK, "IsPrivate": True} for k in job.secrets]
    own = {"CLOUDTRAIN_DETECTORS": detectors_variable(), storage.OUTPUT_ENV: options.output_dir}
    own.update({storage.input_env(name): input_path(name) for name in sorted(job.storage.inputs)})
    if job.storage.checkpoint:
        own["CLOUDTRAIN_CHECKPOINT_DIR"] = CHECKPOINT_DIR
    names = ",".join(sorted([*job.env, *job.secrets]))
    if names:
        own["CLOUDTRAIN_ENV_NAMES"] = names
    if training_mode(job, options) in ("MPI", "HOROVOD", "PS_WORKER"):
        own[PORT_VAR] = str(options.master_port)
    if training_mode(job, options) == "RAY":
        own[NODES_VAR] = str(job.distribution.nodes)
    if rdma:
        own[RDMA_VAR] = "1"
    out += [{"Name": k, "Value": v} for k, v in own.items() if k not in job.env]
    return out


# -- the request -------------------------------------------------------------------------------
def resource_configs(job: JobSpec, options: TioneOptions, rdma: Optional[bool]) -> List[dict]:
    out = []
    for role, count in roles(job):
        rc: dict = {"Role": role}
        if options.resource_group:
            r = job.resources
            if r.cpus_per_node:
                rc["Cpu"] = int(round(r.cpus_per_node * 1000))  # 1/1000 core
            if r.memory_gb:
                rc["Memory"] = int(round(r.memory_gb * 1024))  # MB
            gpus = gpus_per_node(job, options)
            if gpus:
                rc["Gpu"] = int(round(gpus * 100))  # 1/100 card
                require_gpu_type(job, options)
                rc["GpuType"] = gpu_type(job, options)
        elif instance_type(job, options):
            rc["InstanceType"] = instance_type(job, options)
        rc["InstanceNum"] = count
        if rdma is not None:
            rc["RDMAConfig"] = {"Enable": rdma}
        out.append(rc)
    return out


@dataclass(frozen=True)
class TioneRequest(Request):
    """What a tione submit sends, in order: ``upload``, the code archive's ``cos/PutObject``
    (Bucket, Key, Region, ContentType; None when cloudtrain does not upload the code), and
    ``body``, the ``CreateTrainingTask`` request whose start commands (``StartCmdInfo``) stay
    ``ShellText`` until ``task`` gives the body as it is sent."""

    body: dict
    upload: Optional[dict] = None

    @property
    def name(self) -> str:
        return self.body["Name"]

    @property
    def project(self) -> Optional[str]:
        return self.body.get("TiProjectId")

    @property
    def code_upload(self) -> Optional[CodeUpload]:
        if self.upload is None:
            return None
        return CodeUpload(f"cos://{self.upload['Bucket']}/{self.upload['Key']}", region=self.upload["Region"])

    def task(self, secrets: Mapping[str, str] = {}) -> dict:
        """The ``CreateTrainingTask`` body as sent (a copy): the start commands as TI-ONE takes
        them (``command_fields``), each private variable's ``***`` replaced by its secret's value
        from ``secrets`` (none at render)."""
        out: dict = {}
        for key, value in self.body.items():
            if key == "StartCmdInfo":
                out.update(command_fields(value))
            elif key == "Envs":
                out[key] = [dict(e, Value=secrets[e["Name"]]) if e.get("IsPrivate") and e["Value"] == MASK
                            and e["Name"] in secrets else dict(e) for e in value]
            else:
                out[key] = copy.deepcopy(value)
        return out

    def artifacts(self) -> List[Artifact]:
        code = [Artifact(CODE_UPLOAD, "code", dict(self.upload))] if self.upload else []
        return code + [Artifact(CREATE_TASK, self.name, self.task())]


def request(job: JobSpec, options: TioneOptions) -> TioneRequest:
    return TioneRequest(build(job, options), code_upload(job, options))


def build(job: JobSpec, options: TioneOptions) -> dict:
    rdma = rdma_setting(job, options)
    req: dict = {
        "Name": task_name(job),
        "ChargeType": "PREPAID" if options.resource_group else "POSTPAID_BY_HOUR",
        "ResourceConfigInfos": resource_configs(job, options, rdma),
    }
    if options.project:
        req["TiProjectId"] = options.project
    if options.framework:
        req["FrameworkName"] = options.framework.name
        if options.framework.version:
            req["FrameworkVersion"] = options.framework.version
        if options.framework.environment:
            req["FrameworkEnvironment"] = options.framework.environment
    if options.resource_group:
        req["ResourceGroupId"] = options.resource_group
    tags = {TAG_MANAGED: "cloudtrain", TAG_JOB: job.name, TAG_SPEC: Placeholder.SPEC_HASH}
    tags.update(options.tags)
    req["Tags"] = [{"TagKey": k, "TagValue": v} for k, v in tags.items()]
    image = image_info(job, options)
    if image:
        req["ImageInfo"] = image
    upload = code_upload(job, options)
    if upload:  # the archive cloudtrain uploads at submit (the cos/PutObject artifact)
        req["CodePackagePath"] = {"Bucket": upload["Bucket"], "Region": upload["Region"], "Paths": [upload["Key"]]}
    # shell text until the request is sent: the code's digest is filled in shell-quoted (TioneRequest.task)
    req["StartCmdInfo"] = {k: ShellText(v) for k, v in start_commands(job, options).items()}
    req["TrainingMode"] = training_mode(job, options)
    if job.spot:  # the SDK's ResourceSupplyAttribute.SupplyType: TIDE, SPOT, or empty (regular postpaid)
        req["ResourceSupplyAttribute"] = {"SupplyType": "SPOT"}
    configs = data_configs(job, options)
    if configs:
        req["DataConfigs"] = configs
        req["DataSource"] = configs[0]["DataSourceType"]
    if options.queue:  # CreateTrainingTaskRequest.Queues: "队列ID" (list of str)
        req["Queues"] = [options.queue]
    if options.vpc_id:
        req["VpcId"] = options.vpc_id
    if options.subnet_id:
        req["SubnetId"] = options.subnet_id
    output = output_path(job, options)
    if output:
        req["Output"] = output
    if options.cls:
        req["LogEnable"] = True
        req["LogConfig"] = {"LogsetId": options.cls.logset_id, "TopicId": options.cls.topic_id}
    if options.remark:
        req["Remark"] = options.remark
    req["Envs"] = envs(job, options, rdma)
    return req


# -- checks ------------------------------------------------------------------------------------
NO_CPU = " (tasks that need a CPU would never run)"


def check(job: JobSpec, options: TioneOptions) -> List[str]:
    """Raise ``JobFileError`` for what cannot work; return warnings for what may surprise."""
    warnings: List[str] = []
    d, r = job.distribution, job.resources
    from cloudtrain.orchestrate.controller import warn_limited_by_controller, warn_restarted_by_controller
    if job.max_runtime is not None:  # CreateTrainingTaskRequest (SDK v20211111) has no run-time limit field
        warn_limited_by_controller(job, "TI-ONE's CreateTrainingTask has no run-time limit")
    if job.max_restarts:  # CreateTrainingTaskRequest (SDK v20211111, 3.1.191) has no restart or retry field
        warn_restarted_by_controller(job, "TI-ONE's CreateTrainingTask has no restart field")
    if job.resources.shm_gb:  # ResourceConfigInfo (SDK 3.1.191): Cpu, Memory, Gpu, GpuType, InstanceType; no shm
        raise job_error(job, ("resources", "shm_gb"), "TI-ONE's CreateTrainingTask has no /dev/shm setting (the "
                                                      "platform sizes it), so shm_gb would be ignored; drop it for "
                                                      "this provider (--set resources.shm_gb=null)")
    if job.spot and options.resource_group:
        raise job_error(job, ("spot",), "TI-ONE's spot supply (ResourceSupplyAttribute SPOT) is for postpaid specs, "
                                        "not a prepaid resource group; drop spot or use providers.tione.instance_type")
    if options.resource_group and options.instance_type:
        raise job_error(job, opt("instance_type"), "give either instance_type (postpaid) or resource_group "
                                                   "(prepaid), not both")
    if options.framework and options.image:
        raise job_error(job, opt("framework"), "give either framework (a platform image) or image, not both")
    if options.gpus is not None and not options.resource_group:
        raise job_error(job, opt("gpus"), "gpus is for resource groups; with instance_type the spec fixes the GPUs")
    gpus = gpus_per_node(job, options)
    if d.type == "ray":
        if r.cpus_per_node is not None and r.cpus_per_node != int(r.cpus_per_node):
            raise job_error(job, ("resources", "cpus_per_node"),
                            f"Ray schedules whole CPUs and truncates {r.cpus_per_node:g} to "
                            f"{int(r.cpus_per_node)}{NO_CPU if r.cpus_per_node < 1 else ''}; "
                            "give a whole number of cores")
        if gpus and gpus != int(gpus):
            warnings.append(f"Ray sees a {gpus:g}-GPU share as one whole GPU on each node: request num_gpus=1 "
                            "in @ray.remote, and mind that the card is shared")
    if job.network.rdma == "on" and (d.nodes < 2 or gpus != 8):
        raise job_error(job, ("network", "rdma"),
                        f"TI-ONE gives RDMA to jobs of at least 2 nodes with 8 GPUs each (whole HCC machines); this "
                        f"job has {d.nodes} node(s) x {gpus:g} GPU(s): set distribution.nodes >= 2 and "
                        "resources.gpus_per_node: 8, or network.rdma: auto")
    if job.network.rdma == "on" and not options.resource_group:
        raise job_error(job, ("network", "rdma"),
                        f"{POSTPAID_RDMA}: set providers.tione.resource_group to such a group (with resources."
                        "cpus_per_node and memory_gb), or network.rdma: auto")
    rdma = rdma_setting(job, options)
    if rdma and not is_hcc(job, options):
        warnings.append("network.rdma is on, but nothing says the resource group's nodes are HCC machines; RDMA "
                        "needs them (set providers.tione.hcc: true if they are)")
    if not options.resource_group and job.network.rdma == "auto" and d.nodes >= 2 and gpus == 8 \
            and is_hcc(job, options):
        warnings.append(f"RDMA is not requested: {POSTPAID_RDMA}; for RDMA use providers.tione.resource_group")
    if options.resource_group and job.network.rdma == "auto" and rdma is None and d.nodes >= 2 and gpus == 8 \
            and options.hcc is None:
        warnings.append("8-GPU nodes: TI-ONE enables RDMA on HCC types by itself; set providers.tione.hcc "
                        "(true/false) or network.rdma (on/off) to say what you want")
    image = options.image or job.image
    if image and not options.framework and (options.image_type or registry_type(image)) == "TCR" \
            and not options.registry_id:
        raise job_error(job, opt("registry_id"), f"{image} is in a TCR registry: set providers.tione.registry_id "
                                                 "to the registry's instance id (tcr-...)")
    require_gpu_type(job, options)
    data_configs(job, options)  # raises for a bad storage URL or too many mounts
    code_upload(job, options)  # raises for a bad code_store
    build(job, options)  # whatever else render would refuse, validate refuses too
    if len(job.name) > NAME_MAX - SPEC_LEN - 1:
        warnings.append(f"TI-ONE task names have at most {NAME_MAX} characters: the task is named "
                        f"{task_name(job, 'x' * SPEC_LEN)[:NAME_MAX - SPEC_LEN]}... plus the spec hash")
    return warnings


CODE_STORE_HELP = ("the COS prefix cloudtrain uploads the code to (with its launcher), cos://BUCKETNAME-APPID/PREFIX; "
                   "or providers.tione.code_source for code already on COS, CFS, GooseFSx or in the image")


def missing(job: JobSpec, options: TioneOptions) -> List[Tuple[str, str]]:
    """What a submit still needs (a render works without it): (field, what to do)."""
    out = []
    if not options.code_source and not options.code_store:
        out.append(("providers.tione.code_store", CODE_STORE_HELP))
    if not (options.image or job.image or options.framework):
        out.append(("image", "set the job's image (or providers.tione.image or framework)"))
    if options.resource_group:
        if not (job.resources.cpus_per_node and job.resources.memory_gb):
            out.append(("resources.cpus_per_node", "a resource group needs resources.cpus_per_node and "
                                                   "resources.memory_gb of every node"))
    elif not instance_type(job, options):
        out.append(("providers.tione.instance_type", "resources.gpus_per_node alone names no card, so set "
                                                     "resources.accelerator (cloudtrain resources -p tione lists the "
                                                     "specs), providers.tione.instance_type (postpaid) or "
                                                     "resource_group (prepaid)"))
    return out


def detectors_variable() -> str:
    return f"{PLATFORMS[0].name}={PLATFORMS[0].target}"


# -- what TI-ONE gives each node besides the request (a local run emulates it) ------------------
def emulate(job: JobSpec, node_index: int, cluster) -> Dict[str, str]:
    """The variables TI-ONE's distributed-training guide lists for node ``node_index`` in the
    job's training mode (plus the two that the request's Envs carry for cloudtrain: the channel
    port and the RDMA flag); ``cluster``: a ``cloudtrain.providers.provider.Cluster``."""
    options = validate_model(TioneOptions, job.providers.get(PROVIDER) or {}, job.source, opt())
    hosts, nodes = cluster.hosts, job.distribution.nodes
    gpus = job.resources.gpus_per_node
    mode = training_mode(job, options)
    env = {"NODE_LIST": ",".join(f"{h}:{gpus}" for h in hosts), "INDEX": str(node_index)}
    if mode in ("MPI", "HOROVOD"):
        slots = gpus or job.procs_per_node
        env.update({"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "GPU_NUM": str(gpus * nodes),
                    "GPU_NUM_PER_NODE": str(gpus), "NODE_IP_SLOT_LIST": ",".join(f"{h}:{slots}" for h in hosts),
                    PORT_VAR: str(cluster.master_port)})
    elif mode == "PS_WORKER":
        # TI-ONE: every task on port 2222 of its own pod; emulated nodes sharing an address
        # get one port each (master_port + 2 + i), as the launcher does.
        distinct = len(set(hosts)) == len(hosts)
        addrs = [f"{h}:{PS_PORT if distinct else cluster.master_port + 2 + i}" for i, h in enumerate(hosts)]
        ps = job.ps
        task = {"type": "ps", "index": node_index} if node_index < ps else \
            {"type": "worker", "index": node_index - ps}
        env["TF_CONFIG"] = json.dumps({"cluster": {"ps": addrs[:ps], "worker": addrs[ps:]}, "task": task,
                                       "environment": "cloud"})
        env[PORT_VAR] = str(cluster.master_port)
    elif mode == "RAY":
        # the guide's Ray table: HEAD_ADDR, HEAD_PORT, RANK (no node list), plus the request's count
        del env["NODE_LIST"]
        env.update({"HEAD_ADDR": hosts[0], "HEAD_PORT": str(cluster.master_port), "RANK": str(node_index),
                    NODES_VAR: str(nodes)})
    else:
        env.update({"MASTER_ADDR": hosts[0], "MASTER_PORT": str(cluster.master_port), "WORLD_SIZE": str(nodes),
                    "RANK": str(node_index), "GPU_NUM": str(gpus * nodes), "GPU_NUM_PER_NODE": str(gpus)})
    if rdma_setting(job, options):
        env.update(NCCL_PRESET)
        env[RDMA_VAR] = "1"
    return env

