"""``local``: every node a process group in its own working copy of the job's code.

What lives where: ``options.py`` the settings, ``render.py`` the request (one process spec per
node; pure), ``ports.py`` the ports the nodes bind, ``netns.py`` the network namespace, this
module the lifecycle: the submitting process starts a detached supervisor
(``cloudtrain_local.supervisor``) that runs the nodes, writes node- and rank-prefixed logs under
``$CLOUDTRAIN_HOME/runs/<id>/`` and keeps the job's state in the SQLite store, so any shell can
follow, wait for or cancel it.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from cloudtrain.runtime import procs
from cloudtrain.spec.errors import BadInput
from cloudtrain.providers.hosted import HostedProvider, run_values, scrubbed_environ
from cloudtrain.spec.job import JobSpec
from cloudtrain.launch.parent import GROUPS_FILE
from cloudtrain.input.secrets import MASK
from cloudtrain.providers.provider import Cluster, NodeExec, Rendered, State
from cloudtrain.providers.request import fill
from cloudtrain.runtime.store import Store
from cloudtrain.runtime.supervise import TORCHRUN_DIR
from cloudtrain.providers.survival import host_checkpoint_dir, spot_here_means_nothing
from cloudtrain.orchestrate.failures import NODE_FAILURE

from . import netns
from .options import LocalOptions
from .ports import bound_ports, check_ports_free, free_port_block
from .render import LocalRequest, build_request


class LocalProvider(HostedProvider):
    name = "local"
    extra = "local"
    description = "process groups on this machine, one per emulated node"
    Options = LocalOptions
    storage_schemes = ("file",)  # host paths / file:// URIs, used in place
    states = {s.value: s for s in State}
    supervisor_module = "cloudtrain_local.supervisor"
    # The supervisor restarts the whole job itself (max_restarts; core/cloudtrain/runtime/supervise.py).
    restarts_itself = True
    # The supervisor's reason for a node ended by a signal (runtime/supervise.py failure_reason):
    # "node 1 was killed by signal 9" is a node lost.
    failure_words = ((r"was killed by signal", NODE_FAILURE),)

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """None needed: the nodes are this machine's processes."""
        return True, "none needed: this machine"

    # -- render (pure) -----------------------------------------------------------------
    def check(self, job: JobSpec, options: LocalOptions) -> None:
        self.emulated(options)  # an unknown platform is bad input, with the installed ones listed
        host_checkpoint_dir(job, self.name)
        spot_here_means_nothing(job, self.name)

    def render_request(self, job: JobSpec, options: LocalOptions) -> LocalRequest:
        return build_request(job, options, self.emulated(options))

    def runtime_specs(self, rendered: Rendered, run_dir: Path, port: int) -> List[dict]:
        """The rendered node specs (amendments included) with this run's directory and port."""
        job, options = rendered.job, rendered.options
        rendered_port = options.master_port or 29500
        platform = self.emulated(options)
        hosts = ["127.0.0.1"] * job.distribution.nodes
        specs = []
        for spec in fill(rendered.request, run_values(run_dir)).nodes:
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

    def exec_command(self, job_id: str, node: int, command: List[str], interactive: bool) -> NodeExec:
        """``command`` in node ``node``'s working directory with its environment as the supervisor
        gives it (the rendered node environment on this shell's, less what would confuse the
        node's platform detection; the job's secrets are the supervisor's alone: not in it)."""
        row = self.running_row(job_id, "exec")
        spec = self.node_spec(row, node)
        env = scrubbed_environ(os.environ)
        env.update(spec["env"])
        for name, value in spec["env"].items():  # a secret is *** in the plan: not passed on as that
            if value == MASK:
                env.pop(name, None)
        argv = [*netns.entering_prefix(row["supervisor_pid"]), *command] if self.isolated_run(row) else command
        return NodeExec(argv=argv, env=env, cwd=spec["cwd"])

    def isolated_run(self, row: dict) -> bool:
        return bool(json.loads((Path(row["run_dir"]) / "plan.json").read_text()).get("isolate_network"))

    def node_pids(self, job_id: str, node: int) -> List[int]:
        row = self.running_row(job_id, "stacks")
        for found in self.store.get_nodes(job_id):
            if found["node"] == node and found["pid"] and procs.same(found["pid"], found["pid_start"]):
                return [found["pid"]]
        raise BadInput(f"node {node} of {self.handle(job_id)} is not running "
                       f"(it has nodes 0 to {row['nodes'] - 1})")

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
