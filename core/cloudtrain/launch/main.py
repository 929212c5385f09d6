"""``cloudtrain launch``: resolve this node's topology and exec the right launcher.

Standard library only (Python >= 3.8), so it runs in any image that has Python; providers
ship it with the job's code.  See docs/launcher.md for the environment it reads and exports.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import List, Optional

from .exitcodes import EXIT_BAD_INPUT, EXIT_COMMAND_NOT_FOUND, EXIT_JOB_FAILED, EXIT_OK, killed_by
from . import detectors, failure, netif, plans
# liveness, setup and sshd are imported where a plan needs them: a one-node ddp job, the common
# case, starts ~9 ms sooner without them (hashlib, tempfile, socket servers)
from .parent import GROUPS_FILE, die_with_parent
from .topology import Topology

PEER_TIMEOUT = float(os.environ.get("CLOUDTRAIN_PEER_TIMEOUT", "600"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cloudtrain launch",
        description="Inside a node: resolve the topology from the platform's environment and "
                    "exec the launcher for the distribution type.")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the final command as one shell-quoted line and run nothing")
    p.add_argument("--platform", help="skip auto-detection: read this platform's environment")
    p.add_argument("--type", dest="distribution", choices=plans.DISTRIBUTIONS,
                   help="distribution type (default: $CLOUDTRAIN_DISTRIBUTION, then ddp)")
    p.add_argument("--nproc-per-node", type=int,
                   help="processes per node (default: the platform's, then 1)")
    p.add_argument("--max-restarts", type=int, help="torchrun restarts (default: $CLOUDTRAIN_MAX_RESTARTS or 0)")
    p.add_argument("--min-nodes", type=int, help="ddp: start with at least this many nodes (elastic, c10d)")
    p.add_argument("--ps", type=int, help="ps-worker: number of parameter-server nodes (default: $CLOUDTRAIN_PS or 1)")
    p.add_argument("--show-topology", action="store_true", help="print the resolved topology as JSON and exit")
    p.add_argument("--sshd", action="store_true",
                   help="start this node's OpenSSH server first (mpi/horovod: node 0's mpirun reaches the nodes over ssh)")
    p.add_argument("--setup", help="a shell command run once on this node (through /bin/sh) before the launcher starts")
    p.add_argument("--stall-timeout", type=int, metavar="SECONDS",
                   help="ddp: end the node when its first rank printed nothing for this long (stacks dumped first)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    return p


def _int_env(environ, name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    return int(value) if value else default


def settings_for(args, topology: Topology, environ) -> plans.Settings:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if len(command) == 1 and " " in command[0]:
        command = shlex.split(command[0])
    command = with_python_found(command, environ)
    nproc = args.nproc_per_node or topology.nproc_per_node or 1
    distribution = args.distribution or environ.get("CLOUDTRAIN_DISTRIBUTION") or "ddp"
    # `none` meets no peer: its nodes need node 0's name, not node 0 (which may have ended
    # already: a container that has exited leaves Docker's DNS)
    master_ip = master_address(topology, wait=not getattr(args, "print_only", False) and distribution != "none")
    node_ip = netif.local_ip_towards(master_ip)
    iface = environ.get("CLOUDTRAIN_IFNAME") or netif.interface_for(node_ip)
    log_dir = environ.get("CLOUDTRAIN_LOG_DIR") or None
    loopback = netif.is_loopback(master_ip)
    # the files a plan may write (a loopback job's sitecustomize, DeepSpeed's hostfile) go to the
    # run's own directory, else to this user's private one
    needs_dir = not log_dir and (loopback or distribution == "deepspeed")
    return plans.Settings(
        distribution=distribution,
        command=command,
        nproc_per_node=nproc,
        max_restarts=args.max_restarts if args.max_restarts is not None
        else _int_env(environ, "CLOUDTRAIN_MAX_RESTARTS", 0),
        ps=args.ps if args.ps is not None else _int_env(environ, "CLOUDTRAIN_PS", 1),
        job_id=environ.get("CLOUDTRAIN_JOB_ID", "cloudtrain"),
        iface=iface,
        node_ip=node_ip,
        is_root=hasattr(os, "geteuid") and os.geteuid() == 0,
        log_dir=log_dir,
        env_names=[n for n in environ.get("CLOUDTRAIN_ENV_NAMES", "").split(",") if n],
        min_nodes=args.min_nodes,
        python=_python_of(command),
        mpi_major=_open_mpi_major() if distribution == "mpi" and topology.is_master else None,
        loopback=loopback,
        scratch_dir=scratch_dir(create=not getattr(args, "print_only", False)) if needs_dir else None,
    )


def scratch_dir(create: bool = True) -> str:
    """This user's private directory for the launcher's files (``setup.private_dir``).  When
    another local user made that name first (or planted a link there), a new private directory
    of random name instead, and a line that says so: a launch is never stopped by someone else's
    directory, and never reads from it or writes through it."""
    from . import setup
    if not create:
        return setup.private_dir_path()
    try:
        return setup.private_dir()
    except OSError as exc:
        import tempfile
        fresh = tempfile.mkdtemp(prefix="cloudtrain-%d-" % os.getuid())
        print("cloudtrain launch: %s; using %s instead" % (exc, fresh), file=sys.stderr, flush=True)
        return fresh


def write_files(files) -> None:
    """The plan's files, each written to a new file of its directory and renamed into place: a
    name there that already exists (a link, another launch's file) is replaced, never written through."""
    import tempfile
    for path, content in files.items():
        folder = os.path.dirname(path) or "."
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=folder, prefix=".partial-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
            os.chmod(partial, 0o644)
            os.replace(partial, path)
        except BaseException:
            if os.path.exists(partial):
                os.unlink(partial)
            raise


class MasterUnresolved(Exception):
    """Node 0's address did not resolve within the peer timeout."""


def master_address(topology: Topology, wait: bool = True) -> str:
    """Node 0's IP address.  Its DNS record may appear well after this node starts (Volcano's
    and PyTorchJob's headless Services publish a pod once it is Ready, which a large image pull
    delays by minutes), so a node of a multi-node job waits up to the peer timeout, then raises
    ``MasterUnresolved``: a guess (loopback) would leave this node's ranks unable to reach any
    peer while the others wait for it.  One node, ``--print`` or a ``none`` job (no peers to
    meet) waits for nothing and keeps a name that does not resolve."""
    if topology.num_nodes == 1 or not wait:
        try:
            return netif.resolve(topology.master_addr)
        except OSError:
            return topology.master_addr
    try:
        return netif.resolve(topology.master_addr, timeout=PEER_TIMEOUT)
    except OSError:
        raise MasterUnresolved("node 0's address %s did not resolve within %.0fs (CLOUDTRAIN_PEER_TIMEOUT); "
                               "is node 0 running, and does this node's DNS know it?"
                               % (topology.master_addr, PEER_TIMEOUT))


def _on_path(name: str, environ) -> bool:
    for folder in environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False


def with_python_found(command: List[str], environ) -> List[str]:
    """A command that names a bare ``python``/``python3`` that this node's ``PATH`` lacks (Debian
    and many images have only ``python3``) runs in the interpreter that runs the launcher."""
    if command and "/" not in command[0] and plans._PYTHON.match(command[0]) \
            and not _on_path(command[0], environ):
        return [sys.executable] + command[1:]
    return command


def _open_mpi_major() -> Optional[int]:
    """The major version of this node's Open MPI (``mpirun --version``), None if unknown."""
    try:
        out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return plans.mpi_version(out.stdout + out.stderr)


def _python_of(command: List[str]) -> str:
    """The interpreter the job's command names (so the rank shim runs in the same one)."""
    if command and plans._PYTHON.match(command[0]):
        return command[0]
    return "python3"


# shorter than the supervisor's 5 s for the node's own group: the launcher must live to SIGKILL
# its children's groups (Ray's GCS server may outlast a SIGTERM) before it is SIGKILLed itself
STOP_GRACE = 3.0


def _signal_group(pgid: int, sig: int) -> bool:
    """True if the group was there to signal."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _note_group(pgid: int) -> None:
    """Tell the local provider which process groups this node made (Ray's daemons live on in
    them after ``ray start`` exits), so that a node killed outright does not leave them behind."""
    log_dir = os.environ.get("CLOUDTRAIN_LOG_DIR")
    if not log_dir:
        return
    try:
        with open("/proc/%d/stat" % pgid, "rb") as f:
            started = f.read().rsplit(b")", 1)[1].split()[19].decode()
        os.makedirs(log_dir, exist_ok=True)
        with open(os.path.join(log_dir, GROUPS_FILE), "a") as f:
            f.write("%d %s\n" % (pgid, started))
    except (OSError, IndexError):
        pass


class _Children:
    """Children started in their own process groups, all stopped on exit or SIGTERM/SIGINT.

    A group outlives its leader (``ray start`` exits and leaves raylet behind), so groups are
    killed by id, which also keeps two jobs on one machine from stopping each other's Ray.
    """

    def __init__(self):
        self.procs: List[subprocess.Popen] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.stop_all()
        raise SystemExit(killed_by(signum))

    def start(self, argv, env) -> subprocess.Popen:
        proc = subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=die_with_parent())
        self.procs.append(proc)
        _note_group(proc.pid)
        return proc

    def stop_all(self) -> None:
        """SIGTERM every group at once (the launcher may itself be killed soon: Ray's group must
        not wait for the job's to end first), then SIGKILL what is left after the grace."""
        procs, self.procs = self.procs[::-1], []
        for proc in procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline and any(_signal_group(proc.pid, 0) for proc in procs):
            time.sleep(0.05)
        for proc in procs:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.poll()


def _wait_port(host: str, port: int, timeout: float, what: Optional[str] = None) -> None:
    deadline = time.monotonic() + timeout
    from . import liveness
    while not liveness.port_open(host, port):
        if time.monotonic() > deadline:
            raise RuntimeError("%s did not open within %.0fs" % (what or "node 0 (%s:%d)" % (host, port), timeout))
        time.sleep(0.2)


def wait_ports(ports, timeout: float) -> None:
    """Block until every ``(host, port)`` accepts a connection (RuntimeError after ``timeout``)."""
    if ports:
        print("cloudtrain launch: waiting for %s to accept connections"
              % ", ".join("%s:%d" % p for p in ports), file=sys.stderr, flush=True)
    deadline = time.monotonic() + timeout
    for host, port in ports:
        _wait_port(host, port, max(0.0, deadline - time.monotonic()), what="%s:%d" % (host, port))


def _start_ray(children: _Children, argv: List[str], env: dict) -> None:
    """``ray start`` returns once this node's Ray processes are up and registered."""
    code = children.start(argv, env).wait()
    if code != 0:
        raise RuntimeError("%s exited with %d" % (" ".join(argv[:3]), code))


def run(plan: plans.Plan, topology: Topology, env: dict) -> int:
    """Carry out a plan that cannot simply exec; returns this node's exit code."""
    from . import liveness
    children = _Children()
    port = topology.master_port + 1
    try:
        if plan.mode in ("launcher", "ray-head"):
            server = liveness.LivenessServer(port, expected=topology.num_nodes - 1, host=plan.listen_host)
            try:
                if plan.start:
                    _start_ray(children, plan.start, env)
                if plan.wait_peers and not server.wait_for_peers(PEER_TIMEOUT):
                    print("cloudtrain launch: not every node joined within %.0fs; starting anyway"
                          % PEER_TIMEOUT, file=sys.stderr, flush=True)
                code = children.start(plan.argv, env).wait()
            except BaseException:
                server.finish(1, grace=0)
                raise
            server.finish(code)
            return code
        # wait / ray-worker: stay up until node 0 says it is done
        if plan.start:
            host = plan.env.get("RAY_ADDRESS", topology.master_addr).rsplit(":", 1)[0]
            _wait_port(host, topology.master_port, PEER_TIMEOUT)
            _start_ray(children, plan.start, env)
        return liveness.wait_for_launcher(topology.master_addr, port, PEER_TIMEOUT)
    finally:
        children.stop_all()


def run_torchrun(shim: List[str], env: dict, stall_timeout: Optional[int] = None,
                 said: Optional[failure.FailureReader] = None) -> int:
    """torchrun as this node's child, through ``failure.SHIM`` (``shim``: its argv): the node ends
    with the first failing rank's own exit code, says which rank it was and the last lines of its
    error, and a cancel (SIGTERM/SIGINT/SIGHUP, forwarded once) ends it without torchrun's traceback."""
    read_end, write_end = os.pipe()
    watch = None
    if stall_timeout:  # torchrun's output through the watch (launch/stall.py); faulthandler in every rank
        from . import stall
        watch = stall.StallWatch(stall_timeout)
        env = dict(env, PYTHONFAULTHANDLER="1")
    try:
        # its own session: a signal to this node's group reaches torchrun once, through us
        proc = subprocess.Popen(shim, env=dict(env, **{failure.RESULT_FD: str(write_end)}), pass_fds=(write_end,),
                                start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM),
                                stdout=subprocess.PIPE if watch else None)
    finally:
        os.close(write_end)
    pumps = watch.start(proc.stdout, proc) if watch is not None and proc.stdout is not None else []
    forwarded = set()

    def forward(signum, frame):
        if signum not in forwarded:
            forwarded.add(signum)
            try:
                proc.send_signal(signum)
            except OSError:
                pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    code = proc.wait()
    for pump in pumps:
        pump.join()
    with os.fdopen(read_end, "rb") as f:
        raw = f.read()
    try:
        result = json.loads(raw.decode("utf-8")) if raw else {}
    except ValueError:
        result = {}
    if watch is not None and watch.stalled:  # the node's reason is the stall, not the ranks it ended
        say(said, watch.reason)
        return EXIT_JOB_FAILED
    for line in failure.report_lines(result):
        say(said, line[len("cloudtrain launch: "):])
    if result.get("made_log_dir") and result.get("log_dir"):
        import shutil
        shutil.rmtree(result["log_dir"], ignore_errors=True)
    if code < 0:
        return killed_by(-code)
    return code


def command_missing(command: List[str], env) -> Optional[str]:
    """The job's executable when this node cannot find it (on its ``PATH``, or at the path given)."""
    if not command:
        return None
    import shutil
    return None if shutil.which(command[0], path=env.get("PATH", os.defpath)) else command[0]


def load_secrets(environ) -> List[str]:
    """Secrets come as a JSON file (``$CLOUDTRAIN_SECRETS_FILE``) so that they are never part of
    a container's or pod's inspectable environment; the launcher exports them for the command.
    Returns their values (kept out of what the launcher writes for the platform)."""
    path = environ.get("CLOUDTRAIN_SECRETS_FILE")
    if not path:
        return []
    with open(path, encoding="utf-8") as f:
        values = {str(k): str(v) for k, v in json.load(f).items()}
    environ.update(values)
    return [v for v in values.values() if v]


def main(argv: Optional[List[str]] = None, environ=None) -> int:
    environ = dict(os.environ if environ is None else environ)
    args = build_parser().parse_args(argv)
    try:
        secrets = load_secrets(environ)
        topology = detectors.detect(environ, args.platform)
        # where outputs go is cloudtrain's own setting (a provider sets it), whatever the platform
        topology.output_dir = topology.output_dir or environ.get("CLOUDTRAIN_OUTPUT_DIR") or None
        if args.show_topology:
            print(topology.to_json())
            return EXIT_OK
    except (ValueError, OSError, detectors.DetectionError) as exc:
        print("cloudtrain launch: %s" % exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    said = failure.FailureReader()
    code = run_node(args, topology, environ, said)
    if code != EXIT_OK and topology.failure_file:  # where the platform reads why a node failed
        failure.write_reason(topology.failure_file, said.reason(topology.node_rank) or said.last_word
                             or "node %d ended with exit code %d" % (topology.node_rank, code), hide=secrets)
    return code


def say(said: Optional[failure.FailureReader], text: str) -> None:
    """One line of the launcher's own on stderr, also kept for the platform's failure file."""
    line = "cloudtrain launch: %s" % text
    print(line, file=sys.stderr, flush=True)
    if said is not None:
        said.feed(line)


def run_node(args, topology: Topology, environ, said: failure.FailureReader) -> int:
    """This node's part of the job, once its topology is known; its exit code."""
    try:
        settings = settings_for(args, topology, environ)
        plan = plans.plan(topology, settings, environ)
    except MasterUnresolved as exc:
        say(said, str(exc))
        return EXIT_JOB_FAILED
    except (ValueError, OSError, detectors.DetectionError) as exc:
        say(said, str(exc))
        return EXIT_BAD_INPUT
    env = plans.final_environment(plan.env, topology, settings, environ)
    if args.print_only:
        print(plan.shell_line(topology))
        return EXIT_OK
    if args.setup is not None:  # the job's setup: once per node, before anything of the launcher's
        from . import setup
        failed = setup.run_setup(args.setup, env)
        if failed:
            say(said, failed)
            return EXIT_JOB_FAILED
    if args.sshd:
        from . import sshd
        sshd.start_sshd()
    os.makedirs(env["CLOUDTRAIN_OUTPUT_DIR"], exist_ok=True)
    write_files(plan.files)
    try:
        wait_ports(plan.wait_ports, PEER_TIMEOUT)
    except RuntimeError as exc:
        say(said, "%s; are the other nodes' ssh servers running?" % exc)
        return EXIT_JOB_FAILED
    if settings.distribution in ("ddp", "deepspeed", "ray", "ps-worker", "none") and plan.mode != "ray-worker":
        missing = command_missing(settings.command, env)
        if missing:  # before torchrun (or Ray) turns it into a traceback, on every provider
            say(said, "%s: command not found on this node's PATH; install it in the image or "
                "fix the job's command" % missing)
            return EXIT_COMMAND_NOT_FOUND
    shim = failure.shim_argv(plan.argv, env) if plan.mode == "exec" and settings.distribution == "ddp" else None
    if shim is not None:  # else (a torchrun that is not a Python script) exec'd as it is
        return run_torchrun(shim, env, args.stall_timeout, said)
    if plan.mode == "exec":
        try:
            os.execvpe(plan.argv[0], plan.argv, env)
        except FileNotFoundError:
            say(said, "%s: command not found; install it in the image or fix the job's command" % plan.argv[0])
            return EXIT_COMMAND_NOT_FOUND
    try:
        return run(plan, topology, env)
    except (RuntimeError, TimeoutError) as exc:
        say(said, str(exc))
        return EXIT_JOB_FAILED




if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
