"""What azure refuses or cannot check in a job (pure: the job and its options; a compute
cluster's size and tier, once submit has read them).  The provider's ``check``, ``validate`` and
``_create`` call these."""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

from cloudtrain.spec.errors import JobFileError
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.survival import checkpoint_uri

from . import infiniband
from .options import AzureOptions
from .render import CHECKPOINT_OUTPUT, STORAGE_OUTPUT, known_vm_size, looks_like_a_file


def unchecked_offline(job: JobSpec, options: AzureOptions, submit: bool) -> List[Tuple[tuple, str]]:
    """(field, why) of each neutral field the render does not carry, with what happens to it."""
    found: List[Tuple[tuple, str]] = []
    r = job.resources
    cluster = options.compute if options.compute and not options.vm_size else None
    if not submit and job.secrets:
        found.append((("secrets",), f"{', '.join(sorted(job.secrets))} are not in this render: Azure ML stores a "
                                    "command job's variables in clear, so submit refuses them (use the workspace's "
                                    "Key Vault)"))
    if not submit and cluster and job.spot:
        found.append((("spot",), f"compute {cluster!r} is low priority or dedicated by its own tier (AmlCompute "
                                 "tier), not by the job; submit reads its tier and refuses a dedicated cluster"))
    if not submit and cluster and r.gpus_per_node:
        asked = f"{r.accelerator} x {r.gpus_per_node}" if r.accelerator else f"{r.gpus_per_node} GPUs"
        found.append((("resources", "accelerator" if r.accelerator else "gpus_per_node"),
                      f"{asked} is not checked against compute {cluster!r} offline (a cluster's VM size is its "
                      "own); submit reads its size (compute.get) and refuses a size without them; set "
                      "providers.azure.vm_size to the cluster's size to check it here"))
    if (r.cpus_per_node or r.memory_gb) and not r.gpus_per_node and not options.vm_size and not r.instance_type:
        field = "cpus_per_node" if r.cpus_per_node else "memory_gb"
        if cluster and not submit:
            found.append((("resources", field), f"is not checked against compute {cluster!r} offline; submit "
                                                "reads its VM size and refuses one too small"))
        elif not cluster:
            found.append((("resources", field), "chooses no size on azure (its catalog holds GPU sizes only): "
                                                "serverless compute runs Azure ML's default size; set "
                                                "providers.azure.vm_size to a size that large"))
    for name, uri in sorted(job.storage.inputs.items()):
        ref = options.inputs.get(name)
        if looks_like_a_file(uri) and not (ref is not None and "type" in ref.model_fields_set):
            found.append((("storage", "inputs", name), f"{uri} is mounted as a folder (uri_folder); if it is one "
                                                       f"file, set providers.azure.inputs.{name}.type: uri_file"))
    return found


def cluster_problems(job: JobSpec, compute: str, size: Optional[str], tier: Optional[str]) -> List[Tuple[tuple, str]]:
    """What the compute cluster ``compute`` (VM ``size``, AmlCompute ``tier``) cannot give the job."""
    found: List[Tuple[tuple, str]] = []
    if job.spot and tier and tier.replace("_", "").lower() != "lowpriority":
        found.append((("spot",), f"is true, but compute {compute!r} is {tier} (its VMs' tier is the cluster's: "
                                 "AmlCompute tier low_priority); use a low-priority cluster, drop "
                                 "providers.azure.compute for serverless spot, or set spot: false"))
    row = infiniband.catalog().get(size) if size else None
    r = job.resources
    if row is not None and r.gpus_per_node:
        if (r.accelerator and row.accelerator != r.accelerator) or row.count != r.gpus_per_node:
            found.append((("resources", "accelerator" if r.accelerator else "gpus_per_node"),
                          f"asks for {r.accelerator or 'a GPU'} x {r.gpus_per_node}, but compute {compute!r} runs "
                          f"{row.instance_type} ({row.accelerator_label()}); name a cluster of that size, or make "
                          "resources agree with the cluster"))
    if row is not None and not row.fits(r.cpus_per_node, r.memory_gb):
        found.append((("resources", "cpus_per_node" if r.cpus_per_node and (row.vcpus or 0) < r.cpus_per_node
                       else "memory_gb"),
                      f"is more than compute {compute!r} has ({row.instance_type}: {row.vcpus:g} vCPUs, "
                      f"{row.memory_gb:g} GiB); lower it or name a larger cluster"))
    return found


def check(job: JobSpec, options: AzureOptions) -> None:
    """The first thing in the job azure cannot run (``JobFileError`` at its field)."""
    if job.storage.checkpoint and CHECKPOINT_OUTPUT in options.outputs:
        raise JobFileError.at(job, ("providers", "azure", "outputs", CHECKPOINT_OUTPUT),
                          f"the name {CHECKPOINT_OUTPUT!r} holds storage.checkpoint; rename this output")
    checkpoint_uri(job, "Azure ML", ("azureml",), "azureml://datastores/workspaceblobstore/paths/ckpt/digits/")
    if not (options.environment or job.image):
        raise JobFileError.at(job, ("image",), "the azure provider needs an image (or providers.azure.environment, "
                                           "a registered Azure ML environment); set one")
    if job.max_restarts:  # Azure ML does not restart command jobs: the controller submits the job again
        from cloudtrain.orchestrate.controller import warn_restarted_by_controller
        warn_restarted_by_controller(job, "Azure ML does not restart command jobs")
    known = known_vm_size(job, options)
    row = infiniband.catalog().get(known) if known else None
    r = job.resources
    if row is not None and not row.fits(r.cpus_per_node, r.memory_gb):
        field = "cpus_per_node" if r.cpus_per_node and (row.vcpus or 0) < r.cpus_per_node else "memory_gb"
        raise JobFileError.at(job, ("resources", field), f"is more than VM size {row.instance_type} has "
                              f"({row.vcpus:g} vCPUs, {row.memory_gb:g} GiB); lower it, or name a larger size")
    if job.network.rdma == "on":
        size = known
        if size:
            problem = infiniband.rdma_problem(size)
            if problem:
                raise JobFileError.at(job, ("network", "rdma"), problem)
        elif not options.compute:
            raise JobFileError.at(job, ("network", "rdma"), "network.rdma is on, but serverless compute has no VM size "
                              "here; set resources.accelerator and gpus_per_node (or providers.azure.vm_size) to "
                              f"an InfiniBand size such as {infiniband.DEFAULT_SUGGESTION}")
    outputs = {*options.outputs, *([CHECKPOINT_OUTPUT] if job.storage.checkpoint else []),
               *([STORAGE_OUTPUT] if job.storage.output else [])}
    for kind, declared in (("inputs", {*options.inputs, *job.storage.inputs}), ("outputs", outputs)):
        for ref in re.findall(r"\$\{\{\s*%s\.([A-Za-z0-9_]+)\s*\}\}" % kind, job.command_line):
            if ref not in declared:
                raise JobFileError.at(job, ("command",), f"refers to ${{{{{kind}.{ref}}}}}, but providers.azure.{kind} "
                                                     f"has no {ref!r}; declare it there")
    for name, ref in options.inputs.items():
        if not ref.path and name not in job.storage.inputs:
            raise JobFileError.at(job, ("providers", "azure", "inputs", name), "an input needs a path; set path")
    check_storage(job, options)


def check_storage(job: JobSpec, options: AzureOptions) -> None:
    """``storage.output`` is a datastore URI (what ``cloudtrain outputs`` can bring back), its
    output name is free, and an input said twice says the same place."""
    output = job.storage.output
    if output and STORAGE_OUTPUT in options.outputs:
        raise JobFileError.at(job, ("providers", "azure", "outputs", STORAGE_OUTPUT),
                              f"the name {STORAGE_OUTPUT!r} holds storage.output; rename this output")
    for name, uri in sorted(job.storage.inputs.items()):
        ref = options.inputs.get(name)
        if ref is not None and ref.path and ref.path != uri:
            raise JobFileError.at(job, ("storage", "inputs", name), f"is {uri} but providers.azure.inputs.{name} is "
                                  f"{ref.path}; keep one of them (providers.azure.inputs.{name} may give the type "
                                  "and mode alone)")
