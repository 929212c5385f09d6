"""The ``local`` provider's request (pure): one process spec per node (its argv, working
directory and environment), the run's directory and id as the render's placeholders
(``cloudtrain.providers.request.Placeholder.RUN_ID``)."""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional

from cloudtrain.transfer import storage
from cloudtrain.providers.hosted import HostedProvider, rendered_run_dir
from cloudtrain.spec.job import JobSpec
from cloudtrain.launch.platform import Cluster
from cloudtrain.providers.provider import Provider
from cloudtrain.providers.request import Artifact, Request
from cloudtrain.spec.errors import BadInput
from cloudtrain.providers.survival import CHECKPOINT_ENV, host_checkpoint_dir

from .options import LocalOptions


@dataclass(frozen=True)
class LocalRequest(Request):
    """One process spec per node: ``{"node", "code", "cwd", "argv", "env"}`` (secrets as ``***``)."""

    job_name: str
    nodes: tuple

    def artifacts(self) -> List[Artifact]:
        return [Artifact("local/process", f"{self.job_name}-node-{spec['node']}", spec) for spec in self.nodes]


def build_request(job: JobSpec, options: LocalOptions, platform) -> LocalRequest:
    """The job's request; ``platform``: the provider whose node environment the nodes get."""
    code = str(job.code_path)
    specs = node_specs(job, options, platform, run_dir=rendered_run_dir(), master_port=options.master_port or 29500)
    return LocalRequest(job.name, tuple({"node": s["node"], "code": code, **{k: s[k] for k in ("cwd", "argv", "env")}}
                                        for s in specs))


def interpreter_env(python: Optional[str] = None, environ=None) -> Dict[str, str]:
    """``PATH`` (and ``VIRTUAL_ENV``) so that a node's ``python``, ``torchrun``, ``mpirun``,
    ``ray`` and ``deepspeed`` resolve as they do for the interpreter that submits (``sys.prefix``:
    a venv that is not activated still wins), or for ``providers.local.python`` when it is set."""
    environ = os.environ if environ is None else environ
    if python:
        found = python if os.sep in python else shutil.which(python, path=environ.get("PATH"))
        if not found:
            raise BadInput(f"providers.local.python: {python!r} is not on PATH; give the interpreter's full path")
        bin_dir = os.path.dirname(os.path.abspath(found))  # not resolved: a venv's python is a link
        prefix = os.path.dirname(bin_dir)
        venv = prefix if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) else None
    else:
        bin_dir = os.path.join(sys.prefix, "bin")
        venv = sys.prefix if sys.prefix != sys.base_prefix else None
    dirs = [bin_dir] + [d for d in environ.get("PATH", os.defpath).split(os.pathsep) if d and d != bin_dir]
    env = {"PATH": os.pathsep.join(dirs)}
    if venv:
        env["VIRTUAL_ENV"] = venv
    return env


def node_specs(job: JobSpec, options: LocalOptions, platform, *, run_dir: str, master_port: int) -> List[dict]:
    nodes = job.distribution.nodes
    output_dir = str(HostedProvider.host_output(job, run_dir))
    cluster = Cluster(hosts=["127.0.0.1"] * nodes, master_port=master_port, output_dir=output_dir)
    python = options.python or sys.executable
    launch = [python, "-m", "cloudtrain.launch", *job.launch_args(), "--", *job.argv]
    code = str(job.code_path)  # resolve() is a syscall per path part: once, not per node
    job_env = {**interpreter_env(options.python), **Provider.rendered_env(job)}  # the job's own PATH wins
    ours = {"CLOUDTRAIN_OUTPUT_DIR": output_dir, "CLOUDTRAIN_JOB_ID": os.path.basename(run_dir),
            "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
            **{storage.input_env(name): str(storage.local_path(job, uri)) for name, uri in job.storage.inputs.items()}}
    checkpoints = host_checkpoint_dir(job, "local")
    if checkpoints is not None:
        ours[CHECKPOINT_ENV] = str(checkpoints)
    specs = []
    for i in range(nodes):
        env = dict(job_env)
        env.update(platform.environment(job, i, cluster))
        env.update(ours)
        env["CLOUDTRAIN_LOG_DIR"] = os.path.join(run_dir, f"node-{i}")
        if options.emulate:
            env["CLOUDTRAIN_DETECTORS"] = platform.detectors_variable()
        cwd = os.path.join(run_dir, f"node-{i}", "code") if options.copy_code else code
        specs.append({"node": i, "argv": launch, "cwd": cwd, "env": env})
    return specs
