"""What a slurm submit sends for a job: ``SlurmRequest`` (the typed request) and its builders.

Pure: no network, no clock, no credentials, no command run.  ``request`` builds the batch
script exactly as ``sbatch`` gets it (``#SBATCH`` lines, then one ``srun`` that runs ``cloudtrain
launch`` on every node), with the placeholders only a submit knows (the code archive's sha256,
the spec hash) filled in by core's ``fill`` (shell-quoted: the script is a ``ShellText``).

The option names and their meaning are sbatch(1)'s and srun(1)'s (Slurm 22.05; every one used
here exists since Slurm 19.05 at least, ``--gpus-per-node`` since 19.05):
``--nodes``, ``--ntasks-per-node``, ``--gpus-per-node=[type:]N``, ``--cpus-per-task``,
``--mem`` (per node, ``M`` = MiB), ``--time`` (``D-HH:MM:SS``), ``--partition``, ``--account``,
``--qos``, ``--constraint``, ``--job-name``, ``--output`` (``%j`` = the job id), ``--open-mode``,
``--exclusive``, ``--requeue`` / ``--no-requeue``, ``--signal=[B:]SIG[@SECONDS]``, ``--comment``;
``srun --kill-on-bad-exit``.  Containers: pyxis's ``srun --container-image=[USER@][REGISTRY#]IMAGE``,
``--container-mounts=SRC:DST``, ``--container-workdir`` (NVIDIA/pyxis README), or Apptainer's
``apptainer exec --bind DIR --pwd DIR IMAGE COMMAND`` (docker:// for a registry image).
"""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from cloudtrain.input.loading import validate_model
from cloudtrain.input.secrets import MASK
from cloudtrain.launch.unpack import bootstrap_argv
from cloudtrain.providers.request import Artifact, CodeUpload, Placeholder, Request, ShellText
from cloudtrain.spec.errors import JobFileError
from cloudtrain.spec.job import JobSpec
from cloudtrain.transfer import storage
from cloudtrain.transfer.objectstore import CODE_FOLDER
from cloudtrain.transfer.shipping import LAUNCHER_DIR, node_command

from .detect import BATCH_NODE_VAR, PLATFORM, PORT_VAR, RESTART_VAR
from .options import SlurmOptions

PROVIDER = "slurm"
SCRIPTS, LOGS, JOBS = "scripts", "logs", "jobs"  # the workdir's folders besides CODE_FOLDER
COMMENT_PREFIX = "cloudtrain:"  # --comment=cloudtrain:<spec-hash>: how a retried submit finds its job
STORE_SCHEME = "slurm"          # CodeUpload's URL: slurm://workdir/<path under the workdir>
EXIT_FILE, OUTPUT_DIR_FILE = "exit-code", "output-dir"  # what the script leaves in the job's directory


def opt(*loc) -> tuple:
    return ("providers", PROVIDER) + loc


def archive_path(workdir: str, digest: str = Placeholder.CODE_DIGEST) -> str:
    return f"{workdir}/{CODE_FOLDER}/{digest}.tar.gz"


def script_path(workdir: str, spec: str = Placeholder.SPEC_HASH) -> str:
    return f"{workdir}/{SCRIPTS}/{spec}.sbatch"


def log_path(workdir: str, job_id: str) -> str:
    return f"{workdir}/{LOGS}/{job_id}.out"


def job_dir(workdir: str, job_id: str) -> str:
    return f"{workdir}/{JOBS}/{job_id}"


@dataclass(frozen=True)
class WorkdirUpload(CodeUpload):
    """A ``CodeUpload`` into the workdir on the cluster's shared file system (``login``: reached
    over ssh): the provider's ``code_store`` writes it there."""

    login: Optional[str] = None
    workdir: str = ""


@dataclass(frozen=True)
class SlurmRequest(Request):
    """The batch script and where it goes.  ``script`` is what ``sbatch`` reads (written first to
    ``script_file`` on the shared file system, so the job keeps its own copy); ``workdir`` holds
    the code archives, the scripts, the logs and the jobs' directories; ``secrets``: the names
    whose values reach ``sbatch``'s environment through its standard input at submit, never a
    file or an argument."""

    name: str
    script: ShellText
    workdir: str
    script_file: str
    login: Optional[str] = None
    secrets: Tuple[str, ...] = ()
    ships_code: bool = True

    def artifacts(self) -> List[Artifact]:
        out = []
        if self.ships_code:
            out.append(Artifact("slurm/code-archive", archive_path(self.workdir),
                                f"the code and cloudtrain's launcher bundle ({LAUNCHER_DIR}/), a gzip'd tar named "
                                "by its sha256, checked and unpacked by the script"))
        where = f" on {self.login}" if self.login else ""
        out.append(Artifact("slurm/sbatch", f"{self.script_file}{where}",
                            {"command": f"sbatch --parsable {self.script_file}", "script": str(self.script)}))
        return out

    @property
    def code_upload(self) -> Optional[CodeUpload]:
        if not self.ships_code:
            return None
        return WorkdirUpload(f"{STORE_SCHEME}://workdir/{CODE_FOLDER}/{Placeholder.CODE_DIGEST}.tar.gz",
                             login=self.login, workdir=self.workdir)


# -- what the job asks of Slurm ------------------------------------------------------------------
def slurm_time(seconds: float) -> str:
    """``--time`` as ``D-HH:MM:SS`` (sbatch(1): "days-hours:minutes:seconds"), rounded up."""
    total = int(math.ceil(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def partition_and_qos(job: JobSpec, options: SlurmOptions) -> Tuple[Optional[str], Optional[str]]:
    """The partition and QoS: ``spot: true`` takes the preemptible ones the settings name."""
    if not job.spot:
        return options.partition, options.qos
    if not (options.spot_partition or options.spot_qos):
        raise JobFileError.at(job, ("spot",), "is true, but Slurm has no spot capacity of its own: name your "
                                              "cluster's preemptible partition or QoS with providers.slurm."
                                              "spot_partition (sinfo lists the partitions) or providers.slurm.spot_qos "
                                              "(sacctmgr show qos lists them)")
    return options.spot_partition or options.partition, options.spot_qos or options.qos


def gres(job: JobSpec, options: SlurmOptions) -> Optional[str]:
    """``--gpus-per-node``'s value: ``[type:]N`` (the type: ``gpu_type``, else the accelerator's
    name in lower case, as sites usually name their GRES types: a100, h100)."""
    gpus = job.resources.gpus_per_node
    if not gpus:
        return None
    kind = options.gpu_type or (job.resources.accelerator or "").lower() or None
    return f"{kind}:{gpus}" if kind else str(gpus)


def directives(job: JobSpec, options: SlurmOptions) -> List[str]:
    """The ``#SBATCH`` options, in the order a person would write them."""
    d = job.distribution
    nodes = f"{d.min_nodes}-{d.nodes}" if d.min_nodes is not None and d.min_nodes < d.nodes else str(d.nodes)
    out = [f"--job-name={job.name}", f"--nodes={nodes}", "--ntasks-per-node=1"]
    gpus = gres(job, options)
    if gpus:
        out.append(f"--gpus-per-node={gpus}")
    if job.resources.cpus_per_node is not None:
        out.append(f"--cpus-per-task={int(math.ceil(job.resources.cpus_per_node))}")
    if job.resources.memory_gb is not None:
        out.append(f"--mem={int(math.ceil(job.resources.memory_gb * 1024))}M")
    if job.max_runtime is not None:
        out.append(f"--time={slurm_time(float(job.max_runtime))}")
    partition, qos = partition_and_qos(job, options)
    out += [f"--{name}={value}" for name, value in (("partition", partition), ("account", options.account),
                                                   ("qos", qos), ("constraint", options.constraint)) if value]
    if options.exclusive:
        out.append("--exclusive")
    # relative to the job's working directory, which is sbatch's: the home directory (see sdk.Cluster)
    out += [f"--output={log_path(options.workdir, '%j')}", "--open-mode=append"]
    if job.max_restarts:
        # One owner for restarts: Slurm requeues the job (node failure, preemption; a failed run is
        # requeued by the script below), and the signal gives the processes time for a checkpoint.
        out += ["--requeue", f"--signal=TERM@{options.signal_seconds}"]
    else:
        out.append("--no-requeue")
    out.append(f"--comment={COMMENT_PREFIX}{Placeholder.SPEC_HASH}")
    return out


# -- the nodes' side -----------------------------------------------------------------------------
def container_image(image: str, runtime: str) -> str:
    """The job's image as the runtime names it: pyxis wants ``REGISTRY#IMAGE`` (enroot's form) for
    an image on a registry other than Docker Hub; Apptainer wants ``docker://IMAGE`` (a ``.sif``
    file or an absolute path goes as it is)."""
    if runtime == "apptainer":
        if image.endswith(".sif") or image.startswith("/") or "://" in image:
            return image
        return "docker://" + image
    head, sep, rest = image.partition("/")
    if sep and ("." in head or ":" in head or head == "localhost") and "#" not in image:
        return f"{head}#{rest}"
    return image


def node_script(job: JobSpec, options: SlurmOptions) -> str:
    """What every node runs (``bash -c``): the prelude lines, then the launcher from the code."""
    lines = list(options.prelude)
    lines.append(node_command(job, PLATFORM, options.python))
    return "\n".join(lines)


def srun_line(job: JobSpec, options: SlurmOptions) -> str:
    head = ['srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=1']
    quoted = shlex.quote(node_script(job, options))
    if job.image and options.containers == "pyxis":
        image = shlex.quote(container_image(job.image, "pyxis"))
        head.append(f'--container-image={image} --container-mounts="$workdir:$workdir" '
                    '--container-workdir="$code_dir"')
        return " ".join(head) + f" bash -c {quoted}"
    head.append('--chdir="$code_dir"')
    if job.image and options.containers == "apptainer":
        image = shlex.quote(container_image(job.image, "apptainer"))
        return " ".join(head) + f' apptainer exec --bind "$workdir" --pwd "$code_dir" {image} bash -c {quoted}'
    return " ".join(head) + f" bash -c {quoted}"


def storage_exports(job: JobSpec) -> List[Tuple[str, str]]:
    """(variable, shell word) for the inputs, the output and the checkpoint directory: paths on
    the shared file system (relative ones: under the job's directory)."""
    def where(uri: str) -> str:
        path = storage.split(uri)[1]
        return shlex.quote(path) if path.startswith("/") else f'"$job_dir"/{shlex.quote(path)}'
    out = [(storage.input_env(name), where(uri)) for name, uri in sorted(job.storage.inputs.items())]
    out.append((storage.OUTPUT_ENV, where(job.storage.output) if job.storage.output else '"$job_dir/output"'))
    checkpoint = job.storage.checkpoint
    out.append(("CLOUDTRAIN_CHECKPOINT_DIR", where(checkpoint) if checkpoint else '"$job_dir/checkpoint"'))
    return out


def script(job: JobSpec, options: SlurmOptions, detectors: str) -> ShellText:
    """The batch script, exactly as ``sbatch`` reads it (``detectors``: ``CLOUDTRAIN_DETECTORS``,
    how the nodes' launcher finds the slurm detector in the shipped bundle)."""
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {d}" for d in directives(job, options)]
    lines += [
        f"# cloudtrain job {job.name}: {job.distribution.type} on {job.distribution.nodes} node(s), one cloudtrain "
        "launch per node",
        "set -euo pipefail",
        f"workdir={shlex.quote(options.workdir)}",
        'case $workdir in /*) ;; *) workdir="$SLURM_SUBMIT_DIR/$workdir" ;; esac',
        'job_dir="$workdir/jobs/$SLURM_JOB_ID"',
        'code_dir="$job_dir/code"',
        'mkdir -p "$job_dir"',
    ]
    if job.image and not options.containers:
        lines.append(f"# image {job.image} is not used: providers.slurm.containers is not set (pyxis or apptainer)")
    if job.max_restarts:
        lines += [
            f"# restarts: Slurm's requeue count; at most {job.max_restarts}",
            f'if [ "${{SLURM_RESTART_COUNT:-0}}" -gt {job.max_restarts} ]; then',
            f'  echo "cloudtrain: requeued ${{SLURM_RESTART_COUNT}} times, more than max_restarts '
            f'({job.max_restarts}): giving up" >&2',
            f'  echo 1 > "$job_dir/{EXIT_FILE}"',
            "  exit 1",
            "fi",
        ]
    unpack = bootstrap_argv(options.python, Placeholder.CODE_DIGEST, "ARCHIVE", "DEST")
    lines.append(" ".join(shlex.quote(a) for a in unpack[:-2])
                 + f' "$workdir/{CODE_FOLDER}/"{Placeholder.CODE_DIGEST}.tar.gz "$code_dir"')
    for name, value in sorted(job.env.items()):
        lines.append(f"export {name}={shlex.quote(str(value))}")
    if job.secrets:
        lines.append(f"# secrets, in the environment sbatch gave the job (their values are in no file): "
                     f"{' '.join(f'{name}={MASK}' for name in sorted(job.secrets))}")
    for name, word in storage_exports(job):
        lines.append(f"export {name}={word}")
    lines += [
        f'printf \'%s\\n\' "${storage.OUTPUT_ENV}" > "$job_dir/{OUTPUT_DIR_FILE}"',
        f'mkdir -p "${storage.OUTPUT_ENV}" "$CLOUDTRAIN_CHECKPOINT_DIR"',
        f'export {BATCH_NODE_VAR}="${{SLURMD_NODENAME:-}}"',
        f'export {RESTART_VAR}="${{SLURM_RESTART_COUNT:-0}}"',
        f"export CLOUDTRAIN_DETECTORS={shlex.quote(detectors)}",
        f'rm -f "$job_dir/{EXIT_FILE}"',
        "rc=0",
        "# shellcheck disable=SC2016  # the node's shell expands what the single quotes keep",
        srun_line(job, options) + " || rc=$?",
    ]
    if job.max_restarts:
        lines += [
            f'if [ "$rc" -ne 0 ] && [ "${{SLURM_RESTART_COUNT:-0}}" -lt {job.max_restarts} ]; then',
            '  echo "cloudtrain: the run failed (exit $rc): requeueing the job" >&2',
            '  scontrol requeue "$SLURM_JOB_ID"',
            "  exit 0",
            "fi",
        ]
    lines += [f'echo "$rc" > "$job_dir/{EXIT_FILE}"', 'exit "$rc"']
    return ShellText("\n".join(lines) + "\n")


def request(job: JobSpec, options: SlurmOptions, detectors: str) -> SlurmRequest:
    return SlurmRequest(name=job.name, script=script(job, options, detectors), workdir=options.workdir,
                        script_file=script_path(options.workdir), login=options.login,
                        secrets=tuple(sorted(job.secrets)))


def check(job: JobSpec, options: SlurmOptions) -> List[Tuple[tuple, str]]:
    """Raises for what Slurm would refuse or run wrongly; returns warnings, ``(loc, message)``."""
    partition_and_qos(job, options)
    warnings: List[Tuple[tuple, str]] = []
    if job.image and not options.containers:
        warnings.append((("image",), f"{job.image} is not used on Slurm unless providers.slurm.containers says how "
                                     "(pyxis or apptainer); the nodes run in the environment sbatch gives them"))
    if job.network.rdma != "auto":
        warnings.append((("network", "rdma"), f"{job.network.rdma} has no Slurm setting: the nodes use the fabric the "
                                              "cluster has (NCCL and MPI find InfiniBand themselves); set NCCL_* "
                                              "variables in env to steer them"))
    for loc, uri in storage.entries(job):
        path = storage.split(uri)[1]
        if "\0" in path or "\n" in path:
            raise JobFileError.at(job, loc, "holds a NUL or a newline; give a plain path on the cluster")
    if job.storage.checkpoint is not None and storage.scheme(job.storage.checkpoint) != "file":
        raise JobFileError.at(job, ("storage", "checkpoint"),
                              f"slurm cannot take {job.storage.checkpoint!r}: give a path on the cluster's shared "
                              "file system (absolute, or relative to the job's directory)")
    return warnings


def emulate(job: JobSpec, node_index: int, cluster) -> Dict[str, str]:
    """The variables ``srun`` gives node ``node_index`` of the job (plus the two the batch script
    exports), for ``--emulate slurm`` on the local and docker providers."""
    validate_model(SlurmOptions, job.providers.get(PROVIDER) or {}, job.source, opt())
    hosts = list(cluster.hosts)
    env = {
        "SLURM_JOB_ID": "1",
        "SLURM_JOB_NAME": job.name,
        "SLURM_NODEID": str(node_index),
        "SLURM_PROCID": str(node_index),
        "SLURM_JOB_NUM_NODES": str(len(hosts)),
        "SLURM_NNODES": str(len(hosts)),
        "SLURM_NTASKS": str(len(hosts)),
        "SLURM_JOB_NODELIST": ",".join(hosts),
        "SLURM_LAUNCH_NODE_IPADDR": hosts[0],
        BATCH_NODE_VAR: hosts[0],
        PORT_VAR: str(cluster.master_port),
        RESTART_VAR: "0",
    }
    if job.resources.gpus_per_node:
        env["SLURM_GPUS_ON_NODE"] = str(job.resources.gpus_per_node)
    return env
