"""What an azure submit sends, built from the job alone (pure: no SDK, no network, no clock).

``AzureRequest`` is the command job YAML (as a dict) that ``azure.ai.ml.load_job`` reads; render
prints it as the ``azureml/job`` artifact.  It is written out here rather than built with
``azure.ai.ml.command()``: the SDK takes about 1.5 s to import, and render is a dry run that needs
none of it.  The tests load it with ``load_job`` and compare its REST body with the one
``command()`` builds.

A submit sends it as rendered, plus what only a submit knows (``AzureRequest.submitted``): the
job's name and tag holding the spec hash, the staged code's path, and the NCCL/UCX presets of
``network.rdma`` for a compute cluster's VM size read at submit.  Nothing in it is a
placeholder: Azure ML uploads the code itself (``jobs.create_or_update``), so there is no code
URL to fill.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from cloudtrain.transfer import shipping, storage
from cloudtrain.catalogs.instances import choose
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.request import Artifact, Request

from . import infiniband
from .options import AzureOptions, DataRef

NAME = "azure"  # the provider's name (AzureProvider.name): what the node's launch is told its platform is
KIND = "azureml/job"
CHECKPOINT_OUTPUT = "checkpoint"  # the job output that holds storage.checkpoint
STORAGE_OUTPUT = "cloudtrain_output"  # the job output that holds storage.output (CLOUDTRAIN_OUTPUT_DIR)
# The URIs Azure ML takes for a job's data (seed 002, the PyTorch example's note: "AzureML supports
# https://, abfss://, wasbs:// and azureml:// URIs"); azure-ai-ml's load_job passes any string on.
DATA_SCHEMES = ("azureml", "https", "wasbs", "abfss")
SPEC_TAG = "cloudtrain.spec"
OUTPUT_DIR = "outputs"  # Azure ML uploads ./outputs of the job's working directory
JOB_SCHEMA = "https://azuremlschemas.azureedge.net/latest/commandJob.schema.json"
# The type of a storage.inputs entry, whatever its URI looks like: a folder's last segment may have
# a dot (``.../paths/v1.2``, ``imagenet.v2``) and nothing offline tells it from a file's.  It is also
# azure-ai-ml's own default for an input without a type (``Input(type="uri_folder")``,
# azure/ai/ml/entities/_inputs_outputs/input.py); ``providers.azure.inputs.NAME.type: uri_file``
# says an input is one file (and a URI that looks like a file warns: ``checks.unchecked_offline``).
INPUT_TYPE = "uri_folder"

# Azure ML's mpirun starts every rank itself, with no `cloudtrain launch` to export where the
# master is: each rank reads it from Azure's own variables, as cloudtrain_azure.detect does
# (AZ_BATCH_MASTER_NODE=addr:port on several nodes, AZ_BATCHAI_MPI_MASTER_NODE=addr on one;
# AZ_BATCH_HOST_LIST=ip,ip: seed 002 and tests/contract/platform_cases.py).
MPI_MASTER = ('m="${AZ_BATCH_MASTER_NODE:-${AZ_BATCHAI_MPI_MASTER_NODE:-127.0.0.1}}"; '
              'case "$m" in *:*) p="${m##*:}";; *) p=%d;; esac; '
              'export CLOUDTRAIN_MASTER_ADDR="${m%%%%:*}" CLOUDTRAIN_MASTER_PORT="$p" '
              'CLOUDTRAIN_HOSTS="${AZ_BATCH_HOST_LIST:-${m%%%%:*}}"; ')


@dataclass(frozen=True)
class AzureRequest(Request):
    """An Azure ML command job: ``job`` is its YAML (as a dict) for ``load_job``; ``name`` the
    cloudtrain job's name (its display name; the Azure ML job's name adds the spec hash)."""

    name: str
    job: Dict[str, Any]

    def artifacts(self) -> List[Artifact]:
        return [Artifact(KIND, self.name, self.job)]

    def job_name(self, spec: str) -> str:
        """The Azure ML job's name: one per spec (a submit of the same spec finds it by name)."""
        return f"{self.name}-{spec[:10]}"

    def submitted(self, spec: str, code: Path, presets: Mapping[str, str]) -> Dict[str, Any]:
        """The job YAML a submit loads: named and tagged for its ``spec``, its ``code`` the staged
        copy, and the ``presets`` (the NCCL/UCX variables of network.rdma for the VM size known
        at submit) where the job sets none of its own."""
        content = json.loads(json.dumps(self.job))
        content["name"] = self.job_name(spec)
        content.setdefault("tags", {})[SPEC_TAG] = spec
        env = content.setdefault("environment_variables", {})
        for key, value in presets.items():
            env.setdefault(key, value)  # the job's env is in it already: never over the job's own values
        content["code"] = str(code)
        return content


def build(job: JobSpec, options: AzureOptions, detectors: str) -> AzureRequest:
    """The request for ``job`` (``detectors``: ``CLOUDTRAIN_DETECTORS`` for the nodes)."""
    return AzureRequest(job.name, job_dict(job, options, detectors))


def known_vm_size(job: JobSpec, options: AzureOptions) -> Optional[str]:
    """The VM size known without asking Azure: ``vm_size`` (checked against the catalog), or
    serverless compute's size resolved from ``resources`` (accelerator x gpus_per_node, or
    ``instance_type``).  A compute cluster's size is its own: nothing is resolved for it."""
    if options.compute and not options.vm_size:
        return None
    choice = choose(job, infiniband.RULES, options.vm_size)
    return choice.instance_type if choice else None


def job_dict(job: JobSpec, options: AzureOptions, detectors: str) -> dict:
    """The command job YAML (as a dict) that ``azure.ai.ml.load_job`` reads."""
    doc: Dict[str, Any] = {
        "$schema": JOB_SCHEMA,
        "type": "command",
        "display_name": job.name,
        "experiment_name": options.experiment_name or job.name,
        "tags": {"cloudtrain.job": job.name, "cloudtrain.distribution": job.distribution.type, **options.tags},
        "command": with_data_paths(job, node_command(job)),
        "code": str(job.code_path),
        "environment": options.environment or {"image": job.image},
        "environment_variables": environment_variables(job, options, detectors),
    }
    resources: Dict[str, Any] = {"instance_count": job.distribution.nodes}
    size = known_vm_size(job, options)
    if options.compute:
        doc["compute"] = f"azureml:{options.compute}"
    elif size:
        resources["instance_type"] = size
    if job.resources.shm_gb:
        gb = job.resources.shm_gb
        resources["shm_size"] = f"{int(gb)}g" if float(gb).is_integer() else f"{round(gb * 1024)}m"
    doc["resources"] = resources
    dist = distribution(job)
    if dist is not None:
        doc["distribution"] = dist
    if options.timeout:
        doc["limits"] = {"timeout": options.timeout}
    if options.job_tier or options.priority:
        doc["queue_settings"] = {k: v for k, v in (("job_tier", options.job_tier),
                                                   ("priority", options.priority)) if v}
    if options.identity:
        doc["identity"] = {"type": options.identity}
    inputs = job_inputs(job, options)
    if inputs:
        doc["inputs"] = inputs
    outputs = {k: data_ref(v) for k, v in options.outputs.items()}
    if job.storage.checkpoint:  # read-write mount of the datastore path: what one attempt saved, the next sees
        outputs[CHECKPOINT_OUTPUT] = {"type": "uri_folder", "path": job.storage.checkpoint, "mode": "rw_mount"}
    if job.storage.output:  # a read-write mount: what the nodes write there is in the datastore as they write it
        outputs[STORAGE_OUTPUT] = {"type": "uri_folder", "path": job.storage.output, "mode": "rw_mount"}
    if outputs:
        doc["outputs"] = outputs
    return doc


def environment_variables(job: JobSpec, options: AzureOptions, detectors: str) -> Dict[str, str]:
    """The job's env, cloudtrain's variables for the node (``detectors``: its
    ``CLOUDTRAIN_DETECTORS``), and the NCCL/UCX presets of ``network.rdma`` for the VM size known
    offline (never over the job's own values).  Secrets are not here: azure refuses them."""
    kind = job.distribution.type
    env: Dict[str, str] = {"CLOUDTRAIN_DETECTORS": detectors}
    if not job.storage.output:  # else the command exports where Azure ML mounts the output
        env[storage.OUTPUT_ENV] = OUTPUT_DIR
    if kind in ("mpi", "horovod"):
        # No `cloudtrain launch` in between: what it would have exported, fixed per job.
        env.update({"CLOUDTRAIN_PLATFORM": NAME, "CLOUDTRAIN_DISTRIBUTION": kind,
                    "CLOUDTRAIN_NUM_NODES": str(job.distribution.nodes),
                    "CLOUDTRAIN_NPROC_PER_NODE": str(job.procs_per_node)})
    env.update(infiniband.rdma_env(job.network.rdma, known_vm_size(job, options)))
    env.update(job.env)
    return env


def node_command(job: JobSpec) -> str:
    """What every node runs: ``cloudtrain launch`` (which runs the job's setup), or (mpi, horovod:
    Azure ML runs mpirun) the rank shim after the master's address is read from Azure's
    variables; there the shim runs the setup once per node (``--setup``: the node's local rank 0
    runs it, its other ranks wait for the outcome)."""
    if job.distribution.type in ("mpi", "horovod"):
        from .detect import DEFAULT_MASTER_PORT
        setup = [] if job.setup is None else ["--setup=" + job.setup]  # one quoted word: never shell of ours
        return (MPI_MASTER % DEFAULT_MASTER_PORT
                + shipping.with_launcher_path(["python3", "-m", "cloudtrain.launch.mpirank", *setup, "--", *job.argv]))
    return shipping.node_command(job, platform=NAME)


def distribution(job: JobSpec) -> Optional[dict]:
    """The job YAML's ``distribution`` (None: a single-node job without one)."""
    d = job.distribution
    if d.type in ("ddp", "deepspeed") or (d.type in ("none", "ray") and d.nodes > 1):
        return {"type": "pytorch", "process_count_per_instance": 1}
    if d.type in ("mpi", "horovod"):
        return {"type": "mpi", "process_count_per_instance": job.procs_per_node}
    if d.type == "ps-worker":
        return {"type": "tensorflow", "parameter_server_count": job.ps, "worker_count": d.nodes - job.ps}
    return None


def data_ref(ref: DataRef) -> dict:
    return {"type": ref.type, **{k: v for k, v in (("path", ref.path), ("mode", ref.mode)) if v}}


def looks_like_a_file(uri: str) -> bool:
    """The URI's last segment has an extension (``vocab.txt``) and no trailing ``/``: maybe one file."""
    last = uri.rstrip("/").rsplit("/", 1)[-1]
    return not uri.endswith("/") and "." in last.strip(".")


def job_inputs(job: JobSpec, options: AzureOptions) -> Dict[str, dict]:
    """providers.azure.inputs, and storage.inputs as read-only mounts (``ro_mount``; a
    providers.azure.inputs entry of the same name may set its type and mode)."""
    inputs = {k: data_ref(v) for k, v in options.inputs.items()}
    for name, uri in sorted(job.storage.inputs.items()):
        ref = options.inputs.get(name)
        typed = ref.type if ref is not None and "type" in ref.model_fields_set else INPUT_TYPE
        inputs[name] = {"type": typed, "path": uri, "mode": ref.mode if ref is not None and ref.mode else "ro_mount"}
    return inputs


def with_data_paths(job: JobSpec, command: str) -> str:
    """The node command with CLOUDTRAIN_CHECKPOINT_DIR, CLOUDTRAIN_INPUT_<NAME> and
    CLOUDTRAIN_OUTPUT_DIR exported as the paths where Azure ML mounts them.

    ``${{inputs.NAME}}``/``${{outputs.NAME}}`` are data bindings of the command: azure-ai-ml's
    schema says the command "may contain place holders of inputs" (azure/ai/ml/_schema/job/
    parameterized_command.py, ``ParameterizedCommandSchema.command``) and checks the bindings
    of the command alone (``CommandComponent._validate_command``); ``environment_variables`` is
    a plain dict.  So the paths are exported in the command, not set as variables."""
    paths = {}
    if job.storage.checkpoint:
        paths["CLOUDTRAIN_CHECKPOINT_DIR"] = f"outputs.{CHECKPOINT_OUTPUT}"
    for name in sorted(job.storage.inputs):
        paths[storage.input_env(name)] = f"inputs.{name}"
    if job.storage.output:
        paths[storage.OUTPUT_ENV] = f"outputs.{STORAGE_OUTPUT}"
    if not paths:
        return command
    return "export " + " ".join(f"{var}=${{{{{ref}}}}}" for var, ref in paths.items()) + f"; {command}"
