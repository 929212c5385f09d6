"""``local``: every node a process group in its own working copy of the job's code.

The submitting process starts a detached supervisor (``cloudtrain_local.supervisor``) that
runs the nodes, writes node- and rank-prefixed logs under ``$CLOUDTRAIN_HOME/runs/<id>/`` and
keeps the job's state in the SQLite store, so any shell can follow, wait for or cancel it.
"""
from __future__ import annotations

import os
import secrets as _random
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain import procs, storage
from cloudtrain.errors import BadInput, PlatformError
from cloudtrain.hosted import HostedProvider, rendered_run_dir, run_values
from cloudtrain.job import JobSpec
from cloudtrain.request import fill
from cloudtrain.launch.parent import GROUPS_FILE
from cloudtrain.provider import Artifact, Cluster, Rendered, State
from cloudtrain.store import Store
from cloudtrain.supervise import TORCHRUN_DIR
from cloudtrain.survival import CHECKPOINT_ENV, host_checkpoint_dir, spot_here_means_nothing



class LocalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    emulate: Optional[str] = Field(None, description="inject this provider's node environment instead of the generic one")
    master_port: Optional[int] = Field(None, ge=1024, le=65000, description="fixed master port (default: a free one)")
    copy_code: bool = Field(True, description="give every node its own copy of `code` (False: run in place)")
    python: Optional[str] = Field(None, description="interpreter for `cloudtrain launch` (default: this one)")
    isolate_network: Optional[bool] = Field(
        None, description="run the job in its own network namespace (loopback only, no route out); default: "
                          "for mpi, horovod and ray, whose servers listen on every interface otherwise; "
                          "false runs those on the host network anyway")


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


EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
# Where a system says nothing (no /proc: macOS, Windows), the IANA dynamic range is the ephemeral one.
IANA_EPHEMERAL = (49152, 65535)
LOWEST_CHOSEN = 20000  # below: the ports of common services (databases, brokers) crowd


def ephemeral_range(path: str = EPHEMERAL_RANGE_FILE) -> tuple:
    """``(low, high)`` of the ports the kernel hands out to outgoing connections and ``bind(0)``."""
    try:
        with open(path, encoding="ascii") as f:
            low, high = (int(x) for x in f.read().split()[:2])
        return low, high
    except (OSError, ValueError):
        return IANA_EPHEMERAL


def free_port_block(count: int, start: int = LOWEST_CHOSEN, end: int = 65535) -> int:
    """A port ``p`` such that ``p .. p+count-1`` are all free on 127.0.0.1 right now, and all
    outside the ephemeral range: no outgoing connection of any process can be given one of them
    between this check and the node's own bind."""
    low, high = ephemeral_range()
    # the bases whose whole block lies below or above the ephemeral range
    spans = [(a, b) for a, b in ((start, min(end, low - 1)), (max(start, high + 1), end)) if b - a + 1 >= count]
    if not spans:
        raise BadInput(f"no local ports outside the ephemeral range {low}-{high}; set providers.local.master_port")
    rng = _random.SystemRandom()
    sizes = [b - a + 2 - count for a, b in spans]
    for _ in range(200):
        pick = rng.randrange(sum(sizes))
        for (a, _b), size in zip(spans, sizes):
            if pick < size:
                base = a + pick
                break
            pick -= size
        if not any(port_in_use(port) for port in range(base, base + count)):
            return base
    raise BadInput("no free block of local ports found; set providers.local.master_port")


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Can nothing bind ``host:port`` now (a listener, or a connection bound to it)?"""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return False
    except OSError:
        return True
    finally:
        s.close()


def port_holder(port: int) -> Optional[int]:
    """The PID of a process with a TCP socket bound to ``port`` (Linux, a process this user may
    look at), else None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except (OSError, ValueError):
            continue
    inodes.discard("socket:[0]")  # TIME_WAIT entries belong to no process
    if not inodes:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
            except OSError:
                continue
    return None


def bound_ports(distribution: str, nodes: int, master_port: int) -> List[int]:
    """The ports on 127.0.0.1 that a local job's nodes bind: the master port (torchrun's store,
    DeepSpeed, Ray's GCS), the liveness port (+1, when node 0 runs a launcher the others wait
    for) and one port per ps-worker task (+2..)."""
    ports = [master_port] if distribution in ("ddp", "deepspeed", "ray") else []
    if nodes > 1 and distribution in ("mpi", "horovod", "ray"):
        ports.append(master_port + 1)
    if distribution == "ps-worker":
        ports += [master_port + 2 + i for i in range(nodes)]
    return ports


def check_ports_free(ports: List[int]) -> None:
    """A port a job must bind that is taken now is the machine's state, not a fault of the job
    file: refused up front (exit 3), naming the port and, where it can be known, its holder."""
    for port in ports:
        if port_in_use(port):
            pid = port_holder(port)
            holder = f" by pid {pid}" if pid else ""
            raise PlatformError(f"port {port} on 127.0.0.1 is in use{holder} (the machine's state, not the job "
                                "file's fault); stop what holds it, or set another providers.local.master_port "
                                "(or none: a free one is chosen)")


class LocalProvider(HostedProvider):
    name = "local"
    extra = "local"
    description = "process groups on this machine, one per emulated node"
    Options = LocalOptions
    storage_schemes = ("file",)  # host paths / file:// URIs, used in place
    states = {s.value: s for s in State}
    supervisor_module = "cloudtrain_local.supervisor"

    # -- render (pure) -----------------------------------------------------------------
    def check(self, job: JobSpec, options: LocalOptions) -> None:
        self.emulated(options)  # an unknown platform is bad input, with the installed ones listed
        host_checkpoint_dir(job, self.name)
        spot_here_means_nothing(job, self.name)

    def node_specs(self, job: JobSpec, options: LocalOptions, *, run_dir: str, master_port: int) -> List[dict]:
        platform = self.emulated(options)
        nodes = job.distribution.nodes
        cluster = Cluster(hosts=["127.0.0.1"] * nodes, master_port=master_port,
                          output_dir=str(self.host_output(job, run_dir)))
        python = options.python or sys.executable
        launch = [python, "-m", "cloudtrain.launch", *job.launch_args(), "--", *job.argv]
        code = str(job.code_path)  # resolve() is a syscall per path part: once, not per node
        job_env = {**interpreter_env(options.python), **self.rendered_env(job)}  # the job's own PATH wins
        ours = {"CLOUDTRAIN_OUTPUT_DIR": cluster.output_dir, "CLOUDTRAIN_JOB_ID": os.path.basename(run_dir),
                "CLOUDTRAIN_ENV_NAMES": ",".join(sorted([*job.env, *job.secrets])),
                **{storage.input_env(name): str(storage.local_path(job, uri)) for name, uri in job.storage.inputs.items()}}
        checkpoints = host_checkpoint_dir(job, self.name)
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

    def artifacts(self, job: JobSpec, options: LocalOptions) -> List[Artifact]:
        run_dir = rendered_run_dir()
        specs = self.node_specs(job, options, run_dir=run_dir, master_port=options.master_port or 29500)
        code = str(job.code_path)
        return [Artifact("local/process", f"{job.name}-node-{s['node']}",
                         {"node": s["node"], "code": code, **{k: s[k] for k in ("cwd", "argv", "env")}})
                for s in specs]

    def runtime_specs(self, rendered: Rendered, run_dir: Path, port: int) -> List[dict]:
        """The rendered node specs (amendments included) with this run's directory and port."""
        job, options = rendered.job, rendered.options
        rendered_port = options.master_port or 29500
        platform = self.emulated(options)
        hosts = ["127.0.0.1"] * job.distribution.nodes
        specs = []
        for artifact in rendered.artifacts:
            spec = fill(artifact.content, run_values(run_dir))
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
        isolate = self.isolated(job, options)
        # master port, liveness port (+1), one ps-worker port per node (+2..)
        port = options.master_port or free_port_block(job.distribution.nodes + 2)
        if options.master_port:  # before anything is made: a taken port is reported as such, first
            check_ports_free(bound_ports(job.distribution.type, job.distribution.nodes, port))
        job_id, run_dir = self.new_run(job)
        specs = self.runtime_specs(rendered, run_dir, port)
        for spec in specs:  # the rendered env masks secrets; the supervisor adds the real values
            for name in job.secrets:
                spec["env"].pop(name, None)
        return self.start_supervisor(job, job_id, run_dir, {"copy_code": options.copy_code, "nodes": specs,
                                                         "isolate_network": isolate}, secrets)

    def isolated(self, job: JobSpec, options: LocalOptions) -> bool:
        """Does this job run in its own network namespace?  Raises BadInput when it must and
        this machine cannot make one (nothing is started)."""
        from cloudtrain_local import netns
        wanted = options.isolate_network
        if wanted is False:
            if job.distribution.type in netns.UNBOUNDED:
                print(f"cloudtrain: warning: providers.local.isolate_network is false: this {job.distribution.type} "
                      "job's servers listen on every interface of this machine", file=sys.stderr)
            return False
        if wanted is None and job.distribution.type not in netns.UNBOUNDED:
            return False
        if netns.unshare_argv() is None:
            raise BadInput(f"distribution {job.distribution.type}: its servers listen on every interface, and this "
                           "machine does not let this user make a network namespace to contain them (unshare "
                           "--net needs root or user namespaces); set providers.local.isolate_network: false "
                           "to run it on the host network anyway")
        return True

    def supervisor_prefix(self, plan: dict) -> List[str]:
        if not plan.get("isolate_network"):
            return []
        from cloudtrain_local import netns
        return netns.isolating_prefix()

    def release(self, job_id: str) -> None:
        _kill_nodes(self.store, job_id)
        _remove_torchrun_files(self.store, job_id)


def _remove_torchrun_files(store: Store, job_id: str) -> None:
    """A supervisor that died (killed) scrubbed nothing, and its secrets died with it: torchrun's
    files, which may hold them in clear, are removed whole."""
    row = store.get_job(job_id)
    if row and row["run_dir"]:
        for node_dir in Path(row["run_dir"]).glob(f"node-*/{TORCHRUN_DIR}"):
            shutil.rmtree(node_dir, ignore_errors=True)


def _kill_nodes(store: Store, job_id: str) -> None:
    """SIGKILL each node's process group and the groups its launcher made (``node-<i>/groups``:
    Ray's daemons), each only while it is still the job's (PID and start time)."""
    job = store.get_job(job_id)
    for node in store.get_nodes(job_id):
        if node["pid"] and node["exit_code"] is None:
            procs.signal_group(node["pid"], node["pid_start"], signal.SIGKILL)
        groups = Path(job["run_dir"]) / f"node-{node['node']}" / GROUPS_FILE if job else None
        try:
            lines = groups.read_text().splitlines() if groups else []
        except OSError:
            lines = []
        for line in lines:
            pgid, _, started = line.partition(" ")
            if pgid.isdigit() and started.strip().isdigit():
                procs.signal_group(int(pgid), int(started), signal.SIGKILL)
