"""``local``: every node a process group in its own working copy of the job's code.

The submitting process starts a detached supervisor (``cloudtrain_local.supervisor``) that
runs the nodes, writes node- and rank-prefixed logs under ``$CLOUDTRAIN_HOME/runs/<id>/`` and
keeps the job's state in the SQLite store, so any shell can follow, wait for or cancel it.
"""
from __future__ import annotations

import json
import os
import secrets as _random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain.errors import BadInput, JobNotFound
from cloudtrain.job import JobSpec
from cloudtrain.provider import Artifact, Cluster, JobStatus, Provider, Rendered, State
from cloudtrain.store import Store, home

# Variables of the submitting shell that would confuse a node's platform detection.
SCRUBBED_PREFIXES = ("CLOUDTRAIN_", "PET_", "TORCHELASTIC_", "OMPI_", "PMIX_", "SM_", "AZ_BATCH", "MA_", "VC_")
SCRUBBED = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
            "MASTER_ADDR", "MASTER_PORT", "NODE_LIST", "INDEX", "TF_CONFIG", "RAY_ADDRESS",
            "GPU_NUM", "GPU_NUM_PER_NODE", "HEAD_ADDR", "HEAD_PORT", "NNODES"}
KEPT = {"CLOUDTRAIN_HOME", "CLOUDTRAIN_PLUGINS", "CLOUDTRAIN_DISABLE_PLUGINS", "CLOUDTRAIN_PEER_TIMEOUT"}
RUN_ID_PLACEHOLDER = "<run-id>"


class LocalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    emulate: Optional[str] = Field(None, description="inject this provider's node environment instead of the generic one")
    master_port: Optional[int] = Field(None, ge=1024, le=65000, description="fixed master port (default: a free one)")
    copy_code: bool = Field(True, description="give every node its own copy of `code` (False: run in place)")
    python: Optional[str] = Field(None, description="interpreter for `cloudtrain launch` (default: this one)")


def scrubbed_environ(environ) -> Dict[str, str]:
    return {k: v for k, v in environ.items()
            if k in KEPT or not (k in SCRUBBED or k.startswith(SCRUBBED_PREFIXES))}


def free_port_block(count: int, start: int = 29500, end: int = 60000) -> int:
    """A port ``p`` such that ``p .. p+count-1`` are all free on 127.0.0.1 right now."""
    rng = _random.SystemRandom()
    for _ in range(200):
        base = rng.randrange(start, end - count)
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise BadInput("no free block of local ports found; set providers.local.master_port")


class LocalProvider(Provider):
    name = "local"
    extra = "local"
    description = "process groups on this machine, one per emulated node"
    Options = LocalOptions
    states = {s.value: s for s in State}

    def __init__(self, store: Optional[Store] = None, **clients):
        super().__init__(**clients)
        self._store = store

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store()
        return self._store

    # -- render (pure) -----------------------------------------------------------------
    def check(self, job: JobSpec, options: LocalOptions) -> None:
        if options.emulate:
            from cloudtrain.plugins import get_provider_class, providers
            if options.emulate not in providers():
                get_provider_class(options.emulate)  # raises with the list of installed providers
        if job.resources.gpus_per_node:
            pass  # rendered as asked; torchrun falls back to what the machine has

    def emulated(self, options: LocalOptions):
        if not options.emulate:
            return type(self)
        from cloudtrain.plugins import get_provider_class
        return get_provider_class(options.emulate)

    def node_specs(self, job: JobSpec, options: LocalOptions, *, run_dir: str, master_port: int) -> List[dict]:
        platform = self.emulated(options)
        nodes = job.distribution.nodes
        cluster = Cluster(hosts=["127.0.0.1"] * nodes, master_port=master_port,
                          output_dir=os.path.join(run_dir, "output"))
        python = options.python or sys.executable
        launch = [python, "-m", "cloudtrain.launch", *job.launch_args(), "--", *job.argv]
        specs = []
        for i in range(nodes):
            env = dict(self.rendered_env(job))
            env.update(platform.environment(job, i, cluster))
            env.update({
                "CLOUDTRAIN_OUTPUT_DIR": cluster.output_dir,
                "CLOUDTRAIN_LOG_DIR": os.path.join(run_dir, f"node-{i}"),
                "CLOUDTRAIN_JOB_ID": os.path.basename(run_dir),
                "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
            })
            if options.emulate:
                env["CLOUDTRAIN_DETECTORS"] = f"{platform.name}={platform.detector_target()}"
            cwd = os.path.join(run_dir, f"node-{i}", "code") if options.copy_code else str(job.code_path)
            specs.append({"node": i, "argv": launch, "cwd": cwd, "env": env})
        return specs

    def artifacts(self, job: JobSpec, options: LocalOptions) -> List[Artifact]:
        run_dir = str(home() / "runs" / RUN_ID_PLACEHOLDER)
        specs = self.node_specs(job, options, run_dir=run_dir, master_port=options.master_port or 29500)
        return [Artifact("local/process", f"{job.name}-node-{s['node']}",
                         {"node": s["node"], "code": str(job.code_path), **{k: s[k] for k in ("cwd", "argv", "env")}})
                for s in specs]

    def runtime_specs(self, rendered: Rendered, run_dir: Path, port: int) -> List[dict]:
        """The rendered node specs (amendments included) with this run's directory and port."""
        job, options = rendered.job, rendered.options
        placeholder = str(home() / "runs" / RUN_ID_PLACEHOLDER)
        rendered_port = options.master_port or 29500
        platform = self.emulated(options)
        hosts = ["127.0.0.1"] * job.distribution.nodes
        specs = []
        for artifact in rendered.artifacts:
            text = json.dumps(artifact.content).replace(placeholder, str(run_dir))
            spec = json.loads(text.replace(RUN_ID_PLACEHOLDER, run_dir.name))
            if port != rendered_port:
                before = platform.environment(job, spec["node"], Cluster(hosts, rendered_port))
                after = platform.environment(job, spec["node"], Cluster(hosts, port))
                for key, value in after.items():
                    if before.get(key) != value and spec["env"].get(key) == before.get(key):
                        spec["env"][key] = value
            specs.append(spec)
        return specs

    # -- lifecycle ---------------------------------------------------------------------
    def schedule(self, rendered: Rendered, secrets: Dict[str, str]) -> str:
        job, options = rendered.job, rendered.options
        if not job.code_path.is_dir():
            raise BadInput(f"code directory {job.code_path} does not exist; fix `code` in the job file")
        job_id = f"{job.name}-{_random.token_hex(3)}"
        run_dir = home() / "runs" / job_id
        run_dir.mkdir(parents=True, mode=0o700)
        # master port, liveness port (+1), one ps-worker port per node (+2..)
        port = options.master_port or free_port_block(job.distribution.nodes + 2)
        specs = self.runtime_specs(rendered, run_dir, port)
        for spec in specs:  # the rendered env masks secrets; the supervisor adds the real values
            for name in job.secrets:
                spec["env"].pop(name, None)
        plan = {"job_id": job_id, "name": job.name, "code": str(job.code_path), "copy_code": options.copy_code,
                "max_restarts": job.max_restarts, "distribution": job.distribution.type,
                "nproc_per_node": job.procs_per_node, "secret_names": sorted(secrets), "nodes": specs}
        (run_dir / "plan.json").write_text(json.dumps(plan, indent=2))
        self.store.add_job(id=job_id, provider=self.name, name=job.name, nodes=len(specs),
                           run_dir=str(run_dir), state=State.PENDING.value)
        env = scrubbed_environ(os.environ)
        env.update(secrets)
        env["CLOUDTRAIN_HOME"] = str(home())
        env["CLOUDTRAIN_SECRET_NAMES"] = ",".join(sorted(secrets))
        with open(run_dir / "supervisor.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "cloudtrain_local.supervisor", str(run_dir)],
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True, close_fds=True)
        self.store.update_job(job_id, supervisor_pid=proc.pid)
        return job_id

    def _row(self, job_id: str) -> dict:
        row = self.store.get_job(job_id)
        if row is None or row["provider"] != self.name:
            raise JobNotFound(f"no {self.name} job {job_id!r}; cloudtrain list -p {self.name} shows the jobs")
        return row

    def _reconcile(self, row: dict) -> dict:
        """A job whose supervisor vanished without a word has failed."""
        if row["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return row
        pid = row["supervisor_pid"]
        if pid and not _alive(pid):
            time.sleep(0.2)
            fresh = self.store.get_job(row["id"])
            if fresh["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
                _kill_nodes(self.store, row["id"])
                self.store.finish_job(row["id"], "FAILED", message="the local supervisor died; see supervisor.log",
                                      exit_code=1)
            return self.store.get_job(row["id"])
        return row

    def _status(self, row: dict) -> JobStatus:
        return JobStatus(handle=self.handle(row["id"]), state=State(row["state"]), raw_state=row["state"],
                         name=row["name"], message=row["message"], nodes=row["nodes"], nodes_up=row["nodes_up"],
                         exit_code=row["exit_code"], created_at=row["created_at"], started_at=row["started_at"],
                         ended_at=row["ended_at"])

    def status(self, job_id: str) -> JobStatus:
        return self._status(self._reconcile(self._row(job_id)))

    def run_dir(self, job_id: str) -> Path:
        return Path(self._row(job_id)["run_dir"])

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        path = self.run_dir(job_id) / "job.log"
        yield from follow_file(path, (lambda: self.status(job_id).terminal) if follow else None)

    def cancel(self, job_id: str) -> JobStatus:
        row = self._reconcile(self._row(job_id))
        if row["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return self._status(row)
        pid = row["supervisor_pid"]
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
        _kill_nodes(self.store, job_id)
        self.store.finish_job(job_id, "CANCELLED", message="cancelled", exit_code=130)
        return self.status(job_id)

    def list(self) -> List[JobStatus]:
        return [self._status(self._reconcile(r)) for r in self.store.list_jobs(self.name)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _kill_nodes(store: Store, job_id: str) -> None:
    for node in store.get_nodes(job_id):
        if node["pid"] and node["exit_code"] is None:
            try:
                os.killpg(node["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def follow_file(path: Path, done=None, poll: float = 0.2) -> Iterator[str]:
    """Lines of ``path``; with ``done`` (a callable), keep following until it returns True."""
    while done is not None and not path.exists():
        if done():
            break
        time.sleep(poll)
    if not path.exists():
        return
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        pending = ""
        while True:
            chunk = f.readline()
            if chunk:
                pending += chunk
                if pending.endswith("\n"):
                    yield pending
                    pending = ""
                continue
            if done is None:
                break
            if done():
                rest = f.read()
                if pending or rest:
                    yield pending + rest
                break
            time.sleep(poll)
