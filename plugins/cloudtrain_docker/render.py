"""The ``docker`` provider's request, built without touching the engine (pure).

``DockerRequest`` holds the Engine API bodies exactly as ``create_network`` and
``create_container_from_config`` receive them (the run's id and directory as the render's
placeholders, ``cloudtrain.providers.request.Placeholder.RUN_ID``), and the secrets file's names.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from cloudtrain.transfer import storage
from cloudtrain.providers.hosted import RUN_ID, HostedProvider, rendered_run_dir
from cloudtrain.spec.job import JobSpec
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.launch.platform import Cluster
from cloudtrain.launch.sshd import CLIENT_OPTIONS, SSHD_PORT
from cloudtrain.providers.request import Artifact, Request
from cloudtrain.input.secrets import MASK
from cloudtrain.providers.survival import CHECKPOINT_ENV, host_checkpoint_dir

from .options import DockerOptions

LAUNCHER_DIR = "/opt/cloudtrain"
SECRETS_PATH = "/run/cloudtrain/secrets.json"
SSH_DIR = "/run/cloudtrain/ssh"
# The node's lease: a FIFO in the run directory whose one writer is the supervisor; the node's
# entry.sh stops the node when it closes (the supervisor gone, however it died).
LEASE = "lease"
LEASE_PATH = "/run/cloudtrain/lease"
OUTPUT_DIR = "/output"
CHECKPOINT_DIR = "/checkpoints"
INPUTS_DIR = "/inputs"
LABEL = "cloudtrain"
GIB = 1024 ** 3
host_output = HostedProvider.host_output


@dataclass(frozen=True)
class DockerRequest(Request):
    """What the supervisor creates: the job's network, one container per node, and (with
    secrets) the names of the read-only secrets file's entries (their values: ``***``)."""

    network: dict
    containers: tuple
    secrets_file: Optional[dict] = None

    def artifacts(self) -> List[Artifact]:
        out = [Artifact("docker/network", self.network["Name"], self.network)]
        out += [Artifact("docker/container", f"{self.network['Name']}-{i}", body)
                for i, body in enumerate(self.containers)]
        if self.secrets_file is not None:
            out.append(Artifact("docker/secrets-file", SECRETS_PATH, self.secrets_file))
        return out


def build_request(job: JobSpec, options: DockerOptions, platform) -> DockerRequest:
    """The job's request; ``platform``: the provider whose node environment the containers get."""
    run_dir = rendered_run_dir()
    shared = {"cluster": job_cluster(job, options), "platform": platform, "launch": launch_command(job, options)}
    return DockerRequest(
        network=network_body(job, options, RUN_ID),
        containers=tuple(container_body(job, options, RUN_ID, run_dir, i, **shared)
                         for i in range(job.distribution.nodes)),
        secrets_file={name: MASK for name in job.secrets} if job.secrets else None)


def use_ssh(job: JobSpec, options: DockerOptions) -> bool:
    if options.ssh is not None:
        return options.ssh
    return job.distribution.type in ("mpi", "horovod") and job.distribution.nodes > 1

def network_body(job: JobSpec, options: DockerOptions, run_id: str) -> dict:
    return {"Name": f"ct-{run_id}", "Driver": "bridge", "Internal": options.internal_network,
            "CheckDuplicate": True, "Labels": labels(job, run_id)}

def labels(job: JobSpec, run_id: str, node: Optional[int] = None) -> Dict[str, str]:
    labels = {f"{LABEL}.provider": "docker", f"{LABEL}.job": run_id, f"{LABEL}.name": job.name}
    if node is not None:
        labels[f"{LABEL}.node"] = str(node)
    return labels

def container_body(job: JobSpec, options: DockerOptions, run_id: str, run_dir: str, node: int, platform,
                   cluster: Optional[Cluster] = None, launch: Optional[List[str]] = None) -> dict:
    """One node's ContainerCreate body; ``cluster``, ``platform`` and ``launch`` are the same
    for every node, so ``build_request`` computes them once (a 1024-node render stays linear)."""
    cluster = cluster or job_cluster(job, options)
    hosts = cluster.hosts
    env = dict(job.env)
    env.update(platform.environment(job, node, cluster))
    env.update({
        "CLOUDTRAIN_OUTPUT_DIR": OUTPUT_DIR,
        "CLOUDTRAIN_JOB_ID": run_id,
        "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
        "PYTHONPATH": ":".join(filter(None, [LAUNCHER_DIR, job.env.get("PYTHONPATH")])),
    })
    if options.emulate:
        env["CLOUDTRAIN_DETECTORS"] = platform.detectors_variable()
    output = host_output(job, run_dir)
    binds = [f"{run_dir}/node-{node}/code:{options.workdir}", f"{output}:{OUTPUT_DIR}",
             f"{run_dir}/launcher:{LAUNCHER_DIR}:ro", f"{run_dir}/{LEASE}:{LEASE_PATH}:ro"]
    env["CLOUDTRAIN_LEASE"] = LEASE_PATH
    checkpoints = host_checkpoint_dir(job, "docker")
    if checkpoints is not None:  # read-write, the same directory for every node and attempt
        binds.append(f"{checkpoints}:{CHECKPOINT_DIR}")
        env[CHECKPOINT_ENV] = CHECKPOINT_DIR
    for name, uri in sorted(job.storage.inputs.items()):  # read-only, at /inputs/<name>
        binds.append(f"{storage.local_path(job, uri)}:{INPUTS_DIR}/{name}:ro")
        env[storage.input_env(name)] = f"{INPUTS_DIR}/{name}"
    if job.secrets:
        env["CLOUDTRAIN_SECRETS_FILE"] = SECRETS_PATH
        binds.append(f"{run_dir}/secrets.json:{SECRETS_PATH}:ro")
    if use_ssh(job, options):
        binds.append(f"{run_dir}/ssh:{SSH_DIR}:ro")
        env["OMPI_MCA_plm_rsh_args"] = CLIENT_OPTIONS
        # sshd forks into the background before it binds its port, so entry.sh's sshd call
        # returns early: node 0 waits until every node's sshd accepts before mpirun
        env[SSH_WAIT] = str(SSHD_PORT)
    binds += [f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in options.mounts]
    host_config = {
        "Binds": binds,
        "NetworkMode": f"ct-{run_id}",
        "ShmSize": int((job.resources.shm_gb or options.shm_gb) * GIB),
        "Init": True,
    }
    if job.resources.cpus_per_node:
        host_config["NanoCpus"] = int(job.resources.cpus_per_node * 1e9)
    if job.resources.memory_gb:
        host_config["Memory"] = int(job.resources.memory_gb * GIB)
    if job.resources.gpus_per_node:
        host_config["DeviceRequests"] = [{"Driver": "nvidia", "Count": job.resources.gpus_per_node,
                                          "Capabilities": [["gpu"]]}]
    launch = launch or launch_command(job, options)
    return {
        "Image": options.image or job.image,
        "Hostname": hosts[node],
        # our entry point, whatever the image's ENTRYPOINT says
        "Entrypoint": ["/bin/sh", f"{LAUNCHER_DIR}/entry.sh"],
        "Cmd": launch,
        "WorkingDir": options.workdir,
        "Env": [f"{k}={v}" for k, v in env.items()],
        "Labels": labels(job, run_id, node),
        "HostConfig": host_config,
        "NetworkingConfig": {"EndpointsConfig": {f"ct-{run_id}": {"Aliases": [hosts[node]]}}},
    }

def job_cluster(job: JobSpec, options: DockerOptions) -> Cluster:
    return Cluster(hosts=[f"{job.name}-{i}" for i in range(job.distribution.nodes)],
                   master_port=options.master_port, output_dir=OUTPUT_DIR)

def launch_command(job: JobSpec, options: DockerOptions) -> List[str]:
    return [options.python, "-m", "cloudtrain.launch", *job.launch_args(), "--", *job.argv]
