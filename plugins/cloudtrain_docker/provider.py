"""``docker``: one container per node from the job's image, on a per-job internal bridge network.

What lives where: ``options.py`` the settings, ``render.py`` the request (the Engine API bodies
exactly as ``create_network`` / ``create_container_from_config`` receive them; pure), this module
the lifecycle: a detached supervisor (``cloudtrain_docker.supervisor``) creates, follows and
removes them, like the local provider's, so ``status``, ``logs -f``, ``cancel`` and ``wait`` work
from any shell.
"""
from __future__ import annotations

import json
import shutil
from typing import Dict, List, Optional, Tuple

from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.providers.hosted import HostedProvider, run_values
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.provider import NodeExec, State
from cloudtrain.providers.request import Rendered, fill
from cloudtrain.runtime.store import Store, home
from cloudtrain.providers.survival import host_checkpoint_dir, spot_here_means_nothing
from cloudtrain.orchestrate.failures import NODE_FAILURE

from .options import DockerOptions
from .render import LABEL, DockerRequest, build_request, use_ssh



# How a user who installed cloudtrain with pip starts the engine (not a script of cloudtrain's
# repository: scripts/start-dockerd.sh is for its CI and clones only).
START_DOCKER = ("start Docker (Linux: sudo systemctl start docker; macOS and Windows: open Docker Desktop), "
                "check that `docker info` answers, or set DOCKER_HOST to an engine that does")

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
    # The supervisor restarts the whole job itself (max_restarts; core/cloudtrain/runtime/supervise.py).
    restarts_itself = True
    # The supervisor's reason for a node ended by a signal (core/cloudtrain/runtime/supervise.py
    # failure_reason): "node 1 was killed by signal 9" is a node lost; the docker supervisor's "OOMKilled".
    failure_words = ((r"was killed by signal|OOMKilled", NODE_FAILURE),)

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """No credentials: the engine's socket, where ``docker.from_env()`` finds it: ``DOCKER_HOST``,
        else docker-py's default (docker/constants.py, DEFAULT_UNIX_SOCKET: /var/run/docker.sock)."""
        import os
        host = os.environ.get("DOCKER_HOST")
        if host:
            return True, f"DOCKER_HOST={host} (no credentials: the engine's socket)"
        sock = "/var/run/docker.sock"
        return (True, sock) if os.path.exists(sock) else \
            (False, f"no Docker engine socket ({sock}, DOCKER_HOST not set); start Docker")

    def __init__(self, client=None, store: Optional[Store] = None):
        """``client``: a ``docker.DockerClient`` (default: ``docker.from_env()``)."""
        super().__init__(store=store)
        self._client = client

    @property
    def client(self):
        """The engine's client; the first use checks that the engine answers."""
        if self._client is None:
            docker = self.require_sdk("docker")
            try:
                self._client = docker.from_env()
                self._client.ping()
            except docker.errors.DockerException as exc:
                raise PlatformError(f"cannot reach the Docker engine ({exc}); {START_DOCKER}") from None
        return self._client

    # -- render (pure: render.py) -------------------------------------------------------
    def check(self, job: JobSpec, options: DockerOptions) -> None:
        if not (options.image or job.image):
            raise BadInput(f"{job.source.path if job.source and job.source.path else 'job'}: the docker provider "
                           "needs an image; set `image` or providers.docker.image")
        self.emulated(options)
        host_checkpoint_dir(job, self.name)
        spot_here_means_nothing(job, self.name)

    def render_request(self, job: JobSpec, options: DockerOptions) -> DockerRequest:
        return build_request(job, options, self.emulated(options))

    # -- lifecycle -------------------------------------------------------------------------
    def schedule(self, rendered: Rendered[DockerRequest], secrets: Dict[str, str]) -> str:
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
        request: DockerRequest = fill(rendered.request, run_values(run_dir))
        plan = {"image": image, "ssh": use_ssh(job, options),
                "network": {"kind": "docker/network", "name": request.network["Name"], "content": request.network},
                "nodes": [{"kind": "docker/container", "name": f"{request.network['Name']}-{i}", "content": body,
                           "node": i} for i, body in enumerate(request.containers)]}
        return self.start_supervisor(job, job_id, run_dir, plan, secrets)

    def node_container(self, job_id: str, node: int, what: str) -> dict:
        """The running container of node ``node`` (its labels, render.labels), or bad input."""
        row = self.running_row(job_id, what)
        self.node_spec(row, node)  # a node the job does not have: bad input naming those it has
        found = self.client.api.containers(filters={"label": [f"{LABEL}.job={job_id}", f"{LABEL}.node={node}"],
                                                    "status": "running"})
        if not found:
            raise BadInput(f"node {node} of {self.handle(job_id)} has no running container")
        return found[0]

    def exec_command(self, job_id: str, node: int, command: List[str], interactive: bool) -> NodeExec:
        """``docker exec`` into the node's container (its working directory and environment are
        the container's own: WorkingDir and Env of render.py)."""
        container = self.node_container(job_id, node, "exec")
        tool = shutil.which("docker")
        if tool is None:
            raise BadInput("exec into a docker node runs the docker command line, which is not installed here")
        return NodeExec(argv=[tool, "exec", *(["-it"] if interactive else []), container["Id"], *command])

    def node_pids(self, job_id: str, node: int) -> List[int]:
        """The container's first process as this machine sees it (``docker inspect`` State.Pid)."""
        container = self.node_container(job_id, node, "stacks")
        pid = self.client.api.inspect_container(container["Id"])["State"]["Pid"]
        if not pid:
            raise BadInput(f"node {node} of {self.handle(job_id)} has no running process")
        return [int(pid)]

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
