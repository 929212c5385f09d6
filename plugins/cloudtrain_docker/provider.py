"""``docker``: one container per node from the job's image, on a per-job internal bridge network.

Rendering gives the Engine API bodies (``docker/network``, ``docker/container``) exactly as
``create_network`` / ``create_container_from_config`` receive them.  A detached supervisor
(``cloudtrain_docker.supervisor``) creates, follows and removes them, like the local
provider's, so ``status``, ``logs -f``, ``cancel`` and ``wait`` work from any shell.
"""
from __future__ import annotations

import json
import shutil
from typing import Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain.errors import BadInput, PlatformError
from cloudtrain.hosted import RUN_ID, HostedProvider, rendered_run_dir, run_values
from cloudtrain.job import JobSpec
from cloudtrain.request import fill
from cloudtrain.launch.plans import SSH_WAIT
from cloudtrain.launch.sshd import CLIENT_OPTIONS, SSHD_PORT
from cloudtrain.provider import Artifact, Cluster, Rendered, State
from cloudtrain import storage
from cloudtrain.secrets import MASK
from cloudtrain.store import Store, home
from cloudtrain.survival import CHECKPOINT_ENV, host_checkpoint_dir, spot_here_means_nothing

LAUNCHER_DIR = "/opt/cloudtrain"
SECRETS_PATH = "/run/cloudtrain/secrets.json"
SSH_DIR = "/run/cloudtrain/ssh"
OUTPUT_DIR = "/output"
CHECKPOINT_DIR = "/checkpoints"
INPUTS_DIR = "/inputs"
LABEL = "cloudtrain"
GIB = 1024 ** 3


class Mount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(..., description="host path")
    target: str = Field(..., description="path in the container")
    read_only: bool = Field(True, description="mount read-only")


class DockerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image: Optional[str] = Field(None, description="image for every node (default: the job's image)")
    emulate: Optional[str] = Field(None, description="inject this provider's node environment instead of the generic one")
    master_port: int = Field(29500, ge=1024, le=65000, description="the master's port inside the network")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    workdir: str = Field("/workspace", description="where each node's copy of `code` is mounted")
    internal_network: bool = Field(True, description="the job's network has no route out of this machine")
    ssh: Optional[bool] = Field(None, description="per-job ssh keys and sshd for mpirun between nodes (default: on for mpi/horovod with more than one node)")
    shm_gb: float = Field(1.0, gt=0, description="/dev/shm size when the job does not set resources.shm_gb")
    mounts: List[Mount] = Field(default_factory=list, description="extra bind mounts")


class DockerProvider(HostedProvider):
    name = "docker"
    extra = "docker"
    description = "one container per node on a private Docker network"
    sdk_modules = ("docker",)
    Options = DockerOptions
    storage_schemes = ("file",)  # host paths / file:// URIs, bind-mounted (inputs read-only)
    # Engine container states (docker inspect .State.Status) and the store's own states.
    states = {"created": State.STARTING, "restarting": State.STARTING, "running": State.RUNNING,
              "paused": State.RUNNING, "removing": State.RUNNING, "exited": State.UNKNOWN, "dead": State.FAILED,
              **{s.value: s for s in State}}
    supervisor_module = "cloudtrain_docker.supervisor"
    cancel_timeout = 60.0

    def __init__(self, client=None, store: Optional[Store] = None):
        """``client``: a ``docker.DockerClient`` (default: ``docker.from_env()``)."""
        super().__init__(store=store)
        self._client = client

    @property
    def client(self):
        if self._client is None:
            docker = self.require_sdk("docker")
            try:
                self._client = docker.from_env()
                self._client.ping()
            except docker.errors.DockerException as exc:
                raise PlatformError(f"cannot reach the Docker engine ({exc}); start dockerd "
                                    "(scripts/start-dockerd.sh) or set DOCKER_HOST") from None
        return self._client

    # -- render (pure) -------------------------------------------------------------------
    def check(self, job: JobSpec, options: DockerOptions) -> None:
        if not (options.image or job.image):
            raise BadInput(f"{job.source.path if job.source and job.source.path else 'job'}: the docker provider "
                           "needs an image; set `image` or providers.docker.image")
        self.emulated(options)
        host_checkpoint_dir(job, self.name)
        spot_here_means_nothing(job, self.name)

    @staticmethod
    def use_ssh(job: JobSpec, options: DockerOptions) -> bool:
        if options.ssh is not None:
            return options.ssh
        return job.distribution.type in ("mpi", "horovod") and job.distribution.nodes > 1

    def network_body(self, job: JobSpec, options: DockerOptions, run_id: str) -> dict:
        return {"Name": f"ct-{run_id}", "Driver": "bridge", "Internal": options.internal_network,
                "CheckDuplicate": True, "Labels": self.labels(job, run_id)}

    @staticmethod
    def labels(job: JobSpec, run_id: str, node: Optional[int] = None) -> Dict[str, str]:
        labels = {f"{LABEL}.provider": "docker", f"{LABEL}.job": run_id, f"{LABEL}.name": job.name}
        if node is not None:
            labels[f"{LABEL}.node"] = str(node)
        return labels

    def container_body(self, job: JobSpec, options: DockerOptions, run_id: str, run_dir: str, node: int,
                       cluster: Optional[Cluster] = None, platform=None, launch: Optional[List[str]] = None) -> dict:
        """One node's ContainerCreate body; ``cluster``, ``platform`` and ``launch`` are the same
        for every node, so ``artifacts`` computes them once (a 1024-node render stays linear)."""
        platform = platform or self.emulated(options)
        cluster = cluster or self.cluster(job, options)
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
        output = self.host_output(job, run_dir)
        binds = [f"{run_dir}/node-{node}/code:{options.workdir}", f"{output}:{OUTPUT_DIR}",
                 f"{run_dir}/launcher:{LAUNCHER_DIR}:ro"]
        checkpoints = host_checkpoint_dir(job, self.name)
        if checkpoints is not None:  # read-write, the same directory for every node and attempt
            binds.append(f"{checkpoints}:{CHECKPOINT_DIR}")
            env[CHECKPOINT_ENV] = CHECKPOINT_DIR
        for name, uri in sorted(job.storage.inputs.items()):  # read-only, at /inputs/<name>
            binds.append(f"{storage.local_path(job, uri)}:{INPUTS_DIR}/{name}:ro")
            env[storage.input_env(name)] = f"{INPUTS_DIR}/{name}"
        if job.secrets:
            env["CLOUDTRAIN_SECRETS_FILE"] = SECRETS_PATH
            binds.append(f"{run_dir}/secrets.json:{SECRETS_PATH}:ro")
        if self.use_ssh(job, options):
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
        launch = launch or self.launch_command(job, options)
        return {
            "Image": options.image or job.image,
            "Hostname": hosts[node],
            # our entry point, whatever the image's ENTRYPOINT says
            "Entrypoint": ["/bin/sh", f"{LAUNCHER_DIR}/entry.sh"],
            "Cmd": launch,
            "WorkingDir": options.workdir,
            "Env": [f"{k}={v}" for k, v in env.items()],
            "Labels": self.labels(job, run_id, node),
            "HostConfig": host_config,
            "NetworkingConfig": {"EndpointsConfig": {f"ct-{run_id}": {"Aliases": [hosts[node]]}}},
        }

    @staticmethod
    def cluster(job: JobSpec, options: DockerOptions) -> Cluster:
        return Cluster(hosts=[f"{job.name}-{i}" for i in range(job.distribution.nodes)],
                       master_port=options.master_port, output_dir=OUTPUT_DIR)

    @staticmethod
    def launch_command(job: JobSpec, options: DockerOptions) -> List[str]:
        return [options.python, "-m", "cloudtrain.launch", *job.launch_args(), "--", *job.argv]

    def artifacts(self, job: JobSpec, options: DockerOptions) -> List[Artifact]:
        run_dir = rendered_run_dir()
        shared = {"cluster": self.cluster(job, options), "platform": self.emulated(options),
                  "launch": self.launch_command(job, options)}
        out = [Artifact("docker/network", f"ct-{RUN_ID}", self.network_body(job, options, RUN_ID))]
        out += [Artifact("docker/container", f"ct-{RUN_ID}-{i}",
                         self.container_body(job, options, RUN_ID, run_dir, i, **shared))
                for i in range(job.distribution.nodes)]
        if job.secrets:
            out.append(Artifact("docker/secrets-file", SECRETS_PATH, {name: MASK for name in job.secrets}))
        return out

    # -- lifecycle -------------------------------------------------------------------------
    def schedule(self, rendered: Rendered, secrets: Dict[str, str]) -> str:
        job, options = rendered.job, rendered.options
        image = options.image or job.image
        docker = self.require_sdk("docker")
        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound:
            raise BadInput(f"image {image!r} is not on this machine; build or pull it first "
                           "(the test image: bash scripts/build-test-image.sh)") from None
        job_id, run_dir = self.new_run(job)
        from cloudtrain.launch.bundle import write_bundle
        write_bundle(run_dir / "launcher", [self.emulated(options).node_platform()])
        if secrets:  # the launcher reads them from a read-only mount, never from the container's Env
            path = run_dir / "secrets.json"
            path.touch(mode=0o600)
            path.write_text(json.dumps(secrets))
        bodies = []
        for artifact in rendered.artifacts:
            bodies.append({"kind": artifact.kind, "name": artifact.name.replace(RUN_ID, job_id),
                           "content": fill(artifact.content, run_values(run_dir))})
        containers = [b for b in bodies if b["kind"] == "docker/container"]
        plan = {"image": image, "ssh": self.use_ssh(job, options),
                "network": next(b for b in bodies if b["kind"] == "docker/network"),
                "nodes": [dict(b, node=i) for i, b in enumerate(containers)]}
        return self.start_supervisor(job, job_id, run_dir, plan, secrets)

    def release(self, job_id: str) -> None:
        remove_labelled(self.client, job_id)


def remove_labelled(client, job_id: str) -> None:
    flt = {"label": [f"{LABEL}.job={job_id}"]}
    for c in client.api.containers(all=True, filters=flt):
        try:
            client.api.remove_container(c["Id"], force=True)
        except Exception:  # already gone
            pass
    for n in client.api.networks(filters=flt):
        try:
            client.api.remove_network(n["Id"])
        except Exception:
            pass
    run_dir = home() / "runs" / job_id
    for secret in (run_dir / "secrets.json", run_dir / "ssh"):
        if secret.is_dir():
            shutil.rmtree(secret, ignore_errors=True)
        elif secret.exists():
            secret.unlink()
