"""``slurm``: a Slurm cluster, driven through Slurm's own commands (here or on a login node).

The lifecycle calls only: ``render_request`` hands over ``render.SlurmRequest`` (pure); core's
one submit pipeline (``CloudProvider.schedule``) ships the code archive into the workdir on the
shared file system (``code_store``: ``sdk.WorkdirStore``), fills the placeholders and calls
``_find_by_spec`` (a live job whose ``--comment`` names this spec) / ``_create`` (the script
written next to the archive, then ``sbatch``; anything failing after ``sbatch`` cancels the job
before the error is shown).  ``_describe`` reads ``squeue``, then ``scontrol show job`` (both
without accounting), then ``sacct`` (when the cluster keeps accounting), then the job's own files
(the exit code the script writes): a job that left the controller's memory is still reported
truthfully.  A job id is Slurm's (``slurm://1234``), or ``LOGIN/1234`` when the commands run on
a login node over ssh (``slurm://alice@login1/1234``), so a handle reaches its job from anywhere.
"""
from __future__ import annotations

import atexit
import warnings
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from cloudtrain.providers.cloud import CloudProvider, timestamp
from cloudtrain.providers.provider import JobStatus, NodeExec, State
from cloudtrain.providers.request import CodeUpload, Rendered
from cloudtrain.spec.errors import BadInput, CloudtrainWarning, JobNotFound, PlatformError
from cloudtrain.spec.job import JobSpec
from cloudtrain.transfer.objectstore import ObjectUrl

from . import render as rq
from .options import SlurmOptions
from .render import SlurmRequest, WorkdirUpload
from .sdk import (COMMANDS, SACCT_FIELDS, SQUEUE_FORMAT, Cluster, CommandFailed, WorkdirStore, parse_sacct,
                  parse_scontrol, parse_sinfo, parse_squeue, raw_state, slurm_error)


def warn(message: str) -> None:
    print(f"cloudtrain: warning: {message}", file=sys.stderr, flush=True)


def split_id(job_id: str) -> Tuple[Optional[str], str]:
    login, _, number = job_id.rpartition("/")
    if not number.isdigit() or (login and not login.strip()):
        raise BadInput(f"slurm://{job_id} is not a Slurm job id; expected slurm://JOBID or slurm://LOGIN/JOBID, "
                       "e.g. slurm://1234 or slurm://alice@login1/1234 (cloudtrain list -p slurm shows them)")
    return login or None, number


def join_id(login: Optional[str], number: str) -> str:
    return f"{login}/{number}" if login else number


@dataclass
class Described:
    """What the cluster says of one job: ``source`` names who said it (squeue, scontrol, sacct,
    files), ``fields`` in scontrol's key names."""

    job_id: str
    source: str
    fields: Dict[str, str] = field(default_factory=dict)


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(str(value).split(":")[0])
    except (TypeError, ValueError):
        return None


def _time(value: Optional[str]) -> Optional[float]:
    if not value or value in ("Unknown", "N/A", "None"):
        return None
    return timestamp(value)


class SlurmProvider(CloudProvider):
    name = "slurm"
    extra = "slurm"
    description = "a Slurm cluster, through sbatch/squeue/scontrol/scancel here or on a login node over ssh"
    # render.py writes one sbatch --output file for the job: every node's srun output, unlabelled
    log_merged = "the job's one sbatch --output file holds every node's output, merged and unlabelled"
    Options = SlurmOptions
    platform = "slurm"
    # THE table: every job state squeue(1) lists under JOB STATE CODES (Slurm 22.05) -> neutral.
    states = {
        "PENDING": State.PENDING,
        "REQUEUED": State.PENDING,        # requeued (preemption, node failure, --requeue): waits again
        "REQUEUE_FED": State.PENDING,
        "REQUEUE_HOLD": State.PENDING,
        "RESV_DEL_HOLD": State.PENDING,
        "SUSPENDED": State.PENDING,       # its processes are stopped; it resumes where it was
        "CONFIGURING": State.STARTING,    # nodes allocated, booting or being set up
        "RUNNING": State.RUNNING,
        "COMPLETING": State.RUNNING,      # processes ending, epilogs running: not ended yet
        "RESIZING": State.RUNNING,
        "SIGNALING": State.RUNNING,
        "STAGE_OUT": State.RUNNING,
        "STOPPED": State.RUNNING,         # SIGSTOP'd, resources kept
        "COMPLETED": State.SUCCEEDED,
        "FAILED": State.FAILED,
        "TIMEOUT": State.FAILED,          # hit --time (max_runtime)
        "NODE_FAIL": State.FAILED,
        "PREEMPTED": State.FAILED,        # preempted and not requeued (no max_restarts)
        "OUT_OF_MEMORY": State.FAILED,
        "BOOT_FAIL": State.FAILED,
        "DEADLINE": State.FAILED,
        "SPECIAL_EXIT": State.FAILED,
        "CANCELLED": State.CANCELLED,
        "REVOKED": State.CANCELLED,       # federation: a sibling cluster runs it
    }
    stopping = ("COMPLETING", "SIGNALING")
    status_poll = 2.0
    storage_schemes = ("file",)
    refused_fields = {
        "resources.instance_type": "Slurm allocates nodes, not instance types: choose them with "
                                   "providers.slurm.partition or constraint",
        "resources.shm_gb": "Slurm gives /dev/shm as the node has it",
    }
    no_code_upload = "the code is shipped by every slurm submit"
    # With max_restarts the script asks Slurm to requeue the job (sbatch --requeue after a node
    # failure or a preemption; a failed run requeues itself with scontrol requeue while it has
    # restarts left: render.py, docs/providers/slurm.md "Restarts"): one owner for restarts.
    restarts_itself = True

    def __init__(self, poll: Optional[float] = None, ssh: str = "ssh", ssh_options: Tuple[str, ...] = ()):
        """``ssh``/``ssh_options``: the ssh client and extra options (``-F config``, ``-p PORT``) for
        ``providers.slurm.login``; ``poll``: seconds between reads while following a job."""
        super().__init__(poll=poll)
        self._ssh, self._ssh_options = ssh, tuple(ssh_options)
        self._clusters: Dict[Optional[str], Cluster] = {}
        self._stdout: Dict[str, str] = {}  # job id -> its output file, as scontrol named it
        self._workdirs: Dict[str, str] = {}  # job id -> the workdir its submit used

    # -- the cluster ----------------------------------------------------------------------------
    def cluster(self, login: Optional[str]) -> Cluster:
        if login not in self._clusters:
            cluster = Cluster(login, ssh=self._ssh, ssh_options=self._ssh_options)
            self._clusters[login] = cluster
            atexit.register(cluster.close)
        return self._clusters[login]

    def close(self) -> None:
        for cluster in self._clusters.values():
            cluster.close()

    def _run(self, login: Optional[str], argv: List[str], doing: str, **kwargs):
        try:
            return self.cluster(login).run(argv, **kwargs)
        except (CommandFailed, OSError, Exception) as exc:
            if isinstance(exc, (PlatformError, BadInput)):
                raise
            raise slurm_error(exc, doing) from None

    def workdir_of(self, job_id: str) -> str:
        """The workdir of the job: its submit's, else the one its output file (scontrol's StdOut,
        ``<workdir>/logs/<id>.out``) is in, else the settings' (or the default)."""
        if job_id in self._workdirs:
            return self._workdirs[job_id]
        _, number = split_id(job_id)
        stdout, tail = self._stdout.get(job_id, ""), f"/{rq.LOGS}/{number}.out"
        if stdout.endswith(tail) and len(stdout) > len(tail):
            return stdout[:-len(tail)]
        return self.account_option("workdir") or SlurmOptions().workdir

    # -- render (pure) -----------------------------------------------------------------------------
    def check(self, job: JobSpec, options: SlurmOptions) -> None:
        for loc, message in rq.check(job, options):
            warnings.warn(CloudtrainWarning(str(self.job_error(job, loc, message))), stacklevel=2)

    def render_request(self, job: JobSpec, options: SlurmOptions) -> SlurmRequest:
        return rq.request(job, options, self.detectors_variable())

    @classmethod
    def instance(cls, job: JobSpec, options: SlurmOptions):
        """For the ledger: the partition as the "instance", ``providers.slurm.rate`` as its price."""
        partition, _ = rq.partition_and_qos(job, options)
        return _Choice(f"slurm:{partition or 'default'}", _Row(options.rate, options.currency))

    @classmethod
    def credential_check(cls, options) -> Optional[Tuple[bool, str]]:
        """doctor, offline: Slurm's commands on this machine, or ssh for a login node
        (``providers.slurm.login``); a cluster's own credentials are the user's ssh keys and munge."""
        if getattr(options, "login", None):
            if shutil.which("ssh") is None:
                return False, "providers.slurm.login is set, but there is no ssh client on this machine"
            return True, "ssh to providers.slurm.login with your own keys and ssh config (doctor --online checks it)"
        missing = [c for c in COMMANDS if shutil.which(c) is None]
        if not missing:
            return True, "none needed: Slurm's commands on this machine (" + ", ".join(COMMANDS) + ")"
        if shutil.which("ssh"):
            return True, (f"{', '.join(missing)} not on this machine: set providers.slurm.login: user@login-node "
                          "(ssh with your own keys; doctor --online checks it)")
        return False, f"{', '.join(missing)} not on this machine, and no ssh client to reach a login node"

    def online_check(self) -> str:
        """doctor --online: the commands found, the login reachable, a partition listed."""
        login = self.account_option("login")
        cluster = self.cluster(login)
        try:
            missing = cluster.missing_commands()
        except (CommandFailed, OSError) as exc:
            raise slurm_error(exc, f"reaching {login}")
        if missing:
            raise PlatformError(f"{', '.join(missing)} not found {cluster.where}")
        done = self._run(login, ["sinfo", "-h", "-o", "%P|%a|%D"], "listing the partitions")
        partitions = parse_sinfo(done.stdout)
        if not partitions:
            raise PlatformError(f"sinfo lists no partition {cluster.where}")
        names = ", ".join(p.name + ("*" if p.default else "") for p in partitions)
        return f"{cluster.where}: {len(partitions)} partition(s): {names}"

    # -- submit: core's pipeline ships the code here, then these -----------------------------------
    def code_store(self, upload: CodeUpload):
        assert isinstance(upload, WorkdirUpload)
        return WorkdirStore(self.cluster(upload.login), upload.workdir)

    def _find_by_spec(self, rendered: Rendered[SlurmRequest], spec: str) -> Optional[str]:
        """A job of this user still pending or running whose comment names this spec."""
        login = rendered.request.login
        done = self._run(login, ["squeue", "-h", "--me", "-o", SQUEUE_FORMAT], "looking for the job")
        for row in parse_squeue(done.stdout):
            if row["Comment"] == rq.COMMENT_PREFIX + spec and row["JobName"] == rendered.request.name:
                job_id = join_id(login, row["JobId"])
                self._workdirs[job_id] = rendered.request.workdir
                return job_id
        return None

    def _create(self, rendered: Rendered[SlurmRequest], secrets: Dict[str, str], spec: str) -> str:
        request = rendered.request
        login, workdir = request.login, request.workdir
        folders = [f"{workdir}/{rq.SCRIPTS}", f"{workdir}/{rq.LOGS}", f"{workdir}/{rq.JOBS}"]
        self._run(login, ["mkdir", "-p", "--", *folders], f"making {workdir} on the cluster")
        store = WorkdirStore(self.cluster(login), workdir)
        try:
            store.put(ObjectUrl(rq.STORE_SCHEME, "workdir", request.script_file[len(workdir) + 1:]),
                      str(request.script).encode())
        except (CommandFailed, OSError) as exc:
            raise slurm_error(exc, f"writing {request.script_file}")
        # the secrets reach sbatch's environment (exported to the job, sbatch's default) through
        # its standard input: never an argument, never a file
        exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in sorted(secrets.items()))
        done = self._run(login, ["sh", "-c", 'eval "$(cat)" && exec sbatch --parsable "$1"', "sh",
                                 request.script_file], f"submitting {request.name}", stdin=exports.encode())
        number = done.stdout.strip().split(";")[0].strip()
        try:
            if not number.isdigit():
                raise PlatformError(f"sbatch answered {done.stdout.strip()!r}, not a job id")
            job_id = join_id(login, number)
            self._workdirs[job_id] = workdir
            self._describe(job_id)  # the controller knows it: the submit is complete
            return job_id
        except BaseException:
            self._cancel_after_failed_submit(login, number, spec)
            raise

    def _cancel_after_failed_submit(self, login: Optional[str], number: str, spec: str) -> None:
        """The transaction's undo: the job sbatch made (by its id, else by the spec's comment)."""
        cluster = self.cluster(login)
        try:
            if number.isdigit():
                cluster.run(["scancel", number], check=False)
                return
            done = cluster.run(["squeue", "-h", "--me", "-o", SQUEUE_FORMAT], check=False)
            for row in parse_squeue(done.stdout):
                if row["Comment"] == rq.COMMENT_PREFIX + spec:
                    cluster.run(["scancel", row["JobId"]], check=False)
        except Exception as exc:  # noqa: BLE001  the first error is the one to show
            warn(f"could not cancel the job the failed submit left ({exc}); scancel it by hand")

    # -- follow ------------------------------------------------------------------------------------
    def _describe(self, job_id: str) -> Described:
        login, number = split_id(job_id)
        cluster = self.cluster(login)
        try:
            done = cluster.run(["squeue", "-h", "--states=all", "-j", number, "-o", SQUEUE_FORMAT], check=False)
            rows = [r for r in parse_squeue(done.stdout) if r["JobId"] == number]
            queued = rows[0] if rows else None
            if queued is not None and not self.map_state(raw_state(queued["JobState"])).terminal \
                    and job_id in self._stdout:
                return Described(job_id, "squeue", queued)
            shown = cluster.run(["scontrol", "show", "job", "-o", number], check=False)
            if shown.returncode == 0 and shown.stdout.strip():
                fields = parse_scontrol(shown.stdout)
                if fields.get("JobId") == number:
                    if fields.get("StdOut"):
                        self._stdout[job_id] = fields["StdOut"]
                    if queued is not None:  # squeue's word on the state and the reason, scontrol's on the rest
                        fields.update({k: queued[k] for k in ("JobState", "Reason") if queued.get(k)})
                    return Described(job_id, "scontrol" if queued is None else "squeue", fields)
            if queued is not None:
                return Described(job_id, "squeue", queued)
            accounted = cluster.run(["sacct", "-n", "-X", "-P", "-j", number, "-o", ",".join(SACCT_FIELDS)],
                                    check=False)
            rows = [r for r in parse_sacct(accounted.stdout) if r["JobId"] == number]
            if accounted.returncode == 0 and rows:
                return Described(job_id, "sacct", rows[-1])
            return self._from_files(job_id, cluster, number)
        except (CommandFailed, OSError) as exc:
            raise slurm_error(exc, f"reading {self.handle(job_id)}")

    def _from_files(self, job_id: str, cluster: Cluster, number: str) -> Described:
        """The job left squeue and scontrol and there is no accounting: what its script wrote."""
        directory = rq.job_dir(self.workdir_of(job_id), number)
        read = cluster.run(["cat", f"{directory}/{rq.EXIT_FILE}"], check=False)
        code = read.stdout.strip()
        if read.returncode == 0 and code.lstrip("-").isdigit():
            state = "COMPLETED" if int(code) == 0 else "FAILED"
            return Described(job_id, "files", {"JobId": number, "JobState": state, "ExitCode": f"{code}:0"})
        if cluster.run(["test", "-d", directory], check=False).returncode == 0:
            return Described(job_id, "files", {"JobId": number, "JobState": "ENDED",
                                               "Reason": "Slurm no longer remembers the job (no accounting) and its "
                                                         "script wrote no exit code: it was cancelled, timed out, "
                                                         "preempted or lost its node"})
        raise JobNotFound(f"no slurm job {number} {cluster.where}: squeue and scontrol do not know it, sacct has no "
                          f"record of it, and {directory} does not exist (cloudtrain list -p slurm shows the jobs)")

    def _to_status(self, job_id: str, described: Described) -> JobStatus:
        f = described.fields
        raw = raw_state(f.get("JobState", "")) or "UNKNOWN"
        state = self.map_state(raw)
        reason = f.get("Reason", "")
        reason = "" if reason in ("None", "(null)", "") else reason
        exit_code = _int(f.get("ExitCode"))
        if state == State.PENDING and reason:
            message = f"waiting: {reason}"
        elif state == State.FAILED:
            message = f"{raw}" + (f", exit code {exit_code}" if exit_code else "") + (f": {reason}" if reason else "")
        elif state == State.UNKNOWN:
            message = f"Slurm state {raw}" + (f": {reason}" if reason else "")
        else:
            message = reason
        restarts = [{"attempt": i + 1, "reason": "requeued by Slurm", "at": None}
                    for i in range(_int(f.get("Restarts")) or 0)]
        return JobStatus(self.handle(job_id), state, raw, f.get("JobName") or None, message=message,
                         nodes=_int(f.get("NumNodes")), exit_code=exit_code if state.terminal else None,
                         created_at=_time(f.get("SubmitTime")), started_at=_time(f.get("StartTime")),
                         ended_at=_time(f.get("EndTime")) if state.terminal else None, restarts=restarts)

    def exec_command(self, job_id: str, node: int, command: List[str], interactive: bool) -> NodeExec:
        """A step of the running job on its ``node``-th node: ``srun --jobid=ID --overlap
        --nodelist=HOST`` (srun(1), Slurm 22.05: ``--overlap`` lets the step share the job's
        CPUs with the running step; ``--pty`` a terminal for ``-it``), here or over ssh."""
        login, number = split_id(job_id)
        status = self.status(job_id)
        if status.state != State.RUNNING:
            raise BadInput(f"{self.handle(job_id)} is {status.state.value}: exec needs a running job")
        cluster = self.cluster(login)
        try:  # squeue(1) %N: the job's node list; scontrol(1) show hostnames: one host a line, in order
            listed = cluster.run(["squeue", "-h", "-j", number, "-o", "%N"]).stdout.strip()
            hosts = cluster.run(["scontrol", "show", "hostnames", listed]).stdout.split()
        except (CommandFailed, OSError) as exc:
            raise slurm_error(exc, f"reading the nodes of {self.handle(job_id)}")
        if not 0 <= node < len(hosts):
            raise BadInput(f"--node {node}: {self.handle(job_id)} has nodes 0 to {len(hosts) - 1}")
        srun = ["srun", f"--jobid={number}", "--overlap", f"--nodelist={hosts[node]}", "--nodes=1", "--ntasks=1",
                *(["--pty"] if interactive else []), *command]
        argv = cluster.argv(srun)
        if interactive and login:  # ssh's own terminal for srun --pty
            argv = [argv[0], "-t", *argv[1:]]
        return NodeExec(argv=argv)

    def _stop(self, job_id: str) -> None:
        login, number = split_id(job_id)
        self._run(login, ["scancel", number], f"cancelling {self.handle(job_id)}")

    def list(self) -> List[JobStatus]:
        login = self.account_option("login")
        # --states=all: the ended jobs the controller still remembers (MinJobAge) too
        done = self._run(login, ["squeue", "-h", "--me", "--states=all", "-o", SQUEUE_FORMAT], "listing the jobs")
        return [self._to_status(join_id(login, row["JobId"]), Described(row["JobId"], "squeue", row))
                for row in parse_squeue(done.stdout) if row["Comment"].startswith(rq.COMMENT_PREFIX)]

    # -- logs and outputs --------------------------------------------------------------------------
    def log_file(self, job_id: str) -> str:
        _, number = split_id(job_id)
        return self._stdout.get(job_id) or rq.log_path(self.workdir_of(job_id), number)

    def _log_chunks(self, job_id: str, described: Any, cursor: Dict[str, Any], final: bool) -> Iterator[str]:
        """New lines of the job's output file (sbatch --output: the script's and every node's)."""
        login, _ = split_id(job_id)
        offset = cursor.get("offset", 0)
        done = self.cluster(login).run(["tail", "-c", f"+{offset + 1}", self.log_file(job_id)], check=False)
        if done.returncode != 0:
            return  # not written yet (a pending job)
        data = done.stdout.encode() if isinstance(done.stdout, str) else done.stdout
        text = data.decode(errors="replace")
        if not final:
            cut = text.rfind("\n")
            text = text[:cut + 1] if cut >= 0 else ""
        cursor["offset"] = offset + len(text.encode())
        if text:
            yield text

    def outputs(self, job_id: str, dest: Path) -> List[Path]:
        """The job's CLOUDTRAIN_OUTPUT_DIR (on the shared file system) into ``dest``: packed by
        ``tar`` on the cluster, unpacked here by cloudtrain's safe unpacker."""
        from cloudtrain.launch.unpack import unpack
        login, number = split_id(job_id)
        cluster = self.cluster(login)
        self._describe(job_id)  # scontrol names its output file while Slurm remembers the job: the workdir
        directory = rq.job_dir(self.workdir_of(job_id), number)
        named = cluster.run(["cat", f"{directory}/{rq.OUTPUT_DIR_FILE}"], check=False)
        output = named.stdout.strip() if named.returncode == 0 and named.stdout.strip() else f"{directory}/output"
        if cluster.run(["test", "-d", output], check=False).returncode != 0:
            raise BadInput(f"{self.handle(job_id)} has no output directory {output} {cluster.where} (it has not "
                           "started, or its directory was removed)")
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        before = {p for p in dest.rglob("*")}
        with tempfile.NamedTemporaryFile(prefix="cloudtrain-outputs-", suffix=".tar.gz") as packed:
            try:
                # every entry but "." itself (the unpacker refuses a member that names no file)
                script = 'cd -- "$1" && find . -mindepth 1 -print0 | tar --null --no-recursion -T - -czf -'
                cluster.stream(["sh", "-c", script, "sh", output], packed)
            except (CommandFailed, OSError) as exc:
                raise slurm_error(exc, f"packing {output}")
            packed.flush()
            unpack(packed.name, str(dest))
        return sorted(p for p in dest.rglob("*") if p.is_file() and p not in before)


@dataclass(frozen=True)
class _Row:
    price: Optional[float]
    currency: str


@dataclass(frozen=True)
class _Choice:
    instance_type: str
    row: _Row

