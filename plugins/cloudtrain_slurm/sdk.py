"""Slurm's own commands, run on this machine or on a login node over the system ``ssh``.

There is no SDK: users drive Slurm with ``sbatch``, ``squeue``, ``scontrol``, ``sacct`` and
``scancel``, and so does this plugin.  ``Cluster.run(argv)`` runs one command:

- locally: ``argv`` as it is (no shell), from the home directory (a relative ``workdir`` means
  the same here and over ssh, where commands start in the home directory);
- with ``login``: ``ssh [options] LOGIN -- 'quoted argv'``: the remote shell parses one string,
  so every word is ``shlex.quote``d.  The user's own ssh config and keys; ``BatchMode=yes``
  (never a password prompt in the middle of a command); one master connection reused for a
  burst of commands (``ControlMaster=auto``, ``ControlPersist``), its socket in a private (0700)
  directory of ours, closed by ``close``.

``slurm_error`` is the plugin's one error translator: a failed command becomes a
``PlatformError`` naming the command (never its standard input, which carries the secrets).
The parsers read what the commands print, in the formats asked for here.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from cloudtrain.spec.errors import PlatformError
from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl, Progress

COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")  # sacct is optional (accounting)
SSH_PERSIST_SECONDS = 30  # how long the master connection outlives its last command
TIMEOUT = 120.0           # seconds a command may take (a login node under load is slow, not hung)


class CommandFailed(Exception):
    def __init__(self, argv: Sequence[str], returncode: int, stderr: str, where: str):
        self.argv, self.returncode, self.stderr, self.where = list(argv), returncode, stderr, where
        super().__init__(f"{argv[0]} exited with {returncode}")


def slurm_error(exc: Exception, doing: str) -> PlatformError:
    """The one translator: what failed while ``doing``, Slurm's own words (stderr, first lines), and
    what to do when the command or the login node is not there."""
    if isinstance(exc, CommandFailed):
        said = " ".join(exc.stderr.strip().splitlines()[:3]) or f"exit code {exc.returncode}"
        if exc.returncode == 127 or "command not found" in exc.stderr:
            return PlatformError(f"{doing}: {exc.argv[0]} is not installed {exc.where}; run cloudtrain on a login "
                                 "node of the cluster or set providers.slurm.login: user@login-node ({said})")
        if exc.returncode == 255 and exc.where.startswith("on "):
            return PlatformError(f"{doing}: ssh could not reach {exc.where[3:]} ({said}); check `ssh "
                                 f"{exc.where[3:]} true` works without a password prompt (BatchMode)")
        return PlatformError(f"{doing}: {exc.argv[0]} failed {exc.where}: {said}")
    if isinstance(exc, FileNotFoundError):
        return PlatformError(f"{doing}: {exc.filename or exc} is not installed on this machine; run cloudtrain on a "
                             "login node of the cluster or set providers.slurm.login: user@login-node")
    if isinstance(exc, subprocess.TimeoutExpired):
        return PlatformError(f"{doing}: no answer in {exc.timeout:.0f}s")
    return PlatformError(f"{doing}: {exc}")


class Cluster:
    """Runs Slurm's commands here (``login`` None) or on ``login`` over ssh."""

    def __init__(self, login: Optional[str] = None, ssh: str = "ssh", ssh_options: Sequence[str] = ()):
        self.login, self.ssh, self.ssh_options = login, ssh, list(ssh_options)
        self._control: Optional[str] = None

    @property
    def where(self) -> str:
        return f"on {self.login}" if self.login else "on this machine"

    def _control_dir(self) -> str:
        if self._control is None:
            self._control = tempfile.mkdtemp(prefix="cloudtrain-ssh-")  # 0700, ours
        return self._control

    def ssh_argv(self) -> List[str]:
        assert self.login is not None
        control = os.path.join(self._control_dir(), "%C")
        return [self.ssh, "-o", "BatchMode=yes", "-o", "ControlMaster=auto", "-o", f"ControlPath={control}",
                "-o", f"ControlPersist={SSH_PERSIST_SECONDS}", *self.ssh_options, self.login, "--"]

    def argv(self, argv: Sequence[str]) -> List[str]:
        """What is run for ``argv``: itself, or the ssh command that runs it on the login node."""
        if self.login is None:
            return list(argv)
        return self.ssh_argv() + [shlex.join(argv)]

    def run(self, argv: Sequence[str], stdin: Optional[bytes] = None, check: bool = True,
            timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
        """Run ``argv``; its output as text.  ``check``: a non-zero exit raises ``CommandFailed``."""
        done = subprocess.run(self.argv(argv), input=stdin if stdin is not None else b"", stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, cwd=None if self.login else Path.home())
        result = subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(errors="replace"),
                                             done.stderr.decode(errors="replace"))
        if check and done.returncode != 0:
            raise CommandFailed(argv, done.returncode, result.stderr, self.where)
        return result

    def stream(self, argv: Sequence[str], out) -> None:
        """Run ``argv`` with its standard output written to the binary file ``out``."""
        done = subprocess.run(self.argv(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE,
                              timeout=None, cwd=None if self.login else Path.home())
        if done.returncode != 0:
            raise CommandFailed(argv, done.returncode, done.stderr.decode(errors="replace"), self.where)

    def missing_commands(self, names: Sequence[str] = COMMANDS) -> List[str]:
        """The commands among ``names`` the cluster side lacks."""
        if self.login is None:
            return [n for n in names if shutil.which(n) is None]
        script = 'for c in "$@"; do command -v "$c" >/dev/null 2>&1 || echo "$c"; done'
        done = self.run(["sh", "-c", script, "sh", *names])
        return done.stdout.split()

    def close(self) -> None:
        """Close the ssh master connection (if one was opened) and remove its private directory."""
        if self._control is None:
            return
        if self.login is not None:
            control = os.path.join(self._control, "%C")
            # the same options as the connections: %C hashes the host, port and user they name
            subprocess.run([self.ssh, "-o", f"ControlPath={control}", *self.ssh_options, "-O", "exit", self.login],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        shutil.rmtree(self._control, ignore_errors=True)
        self._control = None


class WorkdirStore(ObjectStore):
    """The workdir on the cluster's shared file system as the store a code archive is shipped to:
    ``slurm://workdir/<path>`` is ``<workdir>/<path>``, written with ``cat`` through ``Cluster.run``
    (a private temporary name, then ``mv``: a reader never sees half an archive)."""

    scheme = "slurm"

    def __init__(self, cluster: Cluster, workdir: str):
        self.cluster, self.workdir = cluster, workdir

    @property
    def where(self) -> str:
        return f"{self.cluster.where}:{self.workdir}"

    def path(self, url: ObjectUrl) -> str:
        return f"{self.workdir}/{url.key}"

    def exists(self, url: ObjectUrl) -> bool:
        argv = ["test", "-f", self.path(url)]
        done = self.cluster.run(argv, check=False)
        if done.returncode not in (0, 1):  # test's own answers; anything else: ssh or the shell failed
            raise slurm_error(CommandFailed(argv, done.returncode, done.stderr, self.cluster.where),
                              f"looking for {self.path(url)}")
        return done.returncode == 0

    def put(self, url: ObjectUrl, data: bytes, content_type: str = "application/octet-stream") -> None:
        path = self.path(url)
        script = 'umask 077; mkdir -p "$(dirname "$1")" && cat > "$1.part.$$" && chmod 644 "$1.part.$$" ' \
                 '&& mv -f "$1.part.$$" "$1"'
        try:
            self.cluster.run(["sh", "-c", script, "sh", path], stdin=data)
        except (CommandFailed, OSError) as exc:
            raise slurm_error(exc, f"writing {path}")

    def put_file(self, url: ObjectUrl, path: Path, content_type: str = "application/octet-stream") -> None:
        self.put(url, Path(path).read_bytes(), content_type)

    def objects(self, url: ObjectUrl) -> Iterator[Tuple[ObjectUrl, int]]:
        """Every regular file under ``url`` (or the one file it names), with its size: ``find``'s
        own listing (GNU find ``-printf``: size, a tab, the path below the start), links not
        followed.  A path that is not there lists nothing."""
        path = self.path(url).rstrip("/")
        script = 'if [ -e "$1" ]; then find "$1" -type f -printf "%s\\t%P\\n"; fi'
        try:
            done = self.cluster.run(["sh", "-c", script, "sh", path])
        except (CommandFailed, OSError) as exc:
            raise slurm_error(exc, f"listing {path}")
        for line in done.stdout.splitlines():
            size, _, below = line.partition("\t")
            key = f"{url.key.rstrip('/')}/{below}" if below else url.key
            yield ObjectUrl(url.scheme, url.bucket, key.lstrip("/")), int(size)

    def fetch(self, url: ObjectUrl, dest: Path, progress: Optional[Progress] = None) -> None:
        """The file ``url`` streamed into ``dest`` (``cat`` through ``Cluster.stream``: the
        bytes as they are, never held whole in memory); ``progress`` hears the size once done."""
        path = self.path(url)
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(dest, "wb") as out:
                self.cluster.stream(["cat", "--", path], out)
        except (CommandFailed, OSError) as exc:
            raise slurm_error(exc, f"reading {path}")
        if progress is not None:
            progress(dest.stat().st_size)


# -- what the commands print ---------------------------------------------------------------------
# squeue -o: the fields cloudtrain reads, '|'-separated, the reason last (it may hold spaces).
# squeue(1): %i job id, %T state (long form), %D nodes, %V submit time, %S start time, %e end
# time, %j name, %k comment, %r reason.
SQUEUE_FORMAT = "%i|%T|%D|%V|%S|%e|%j|%k|%r"
SQUEUE_FIELDS = ("JobId", "JobState", "NumNodes", "SubmitTime", "StartTime", "EndTime", "JobName", "Comment",
                 "Reason")
# sacct --parsable2 -o: the same facts from the accounting database.
SACCT_FIELDS = ("JobID", "State", "NNodes", "Submit", "Start", "End", "JobName", "ExitCode", "Reason")


def parse_squeue(text: str) -> List[Dict[str, str]]:
    """``squeue -h -o SQUEUE_FORMAT`` lines -> one dict per job, scontrol's key names."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split("|", len(SQUEUE_FIELDS) - 1)
        if len(values) == len(SQUEUE_FIELDS):
            rows.append(dict(zip(SQUEUE_FIELDS, (v.strip() for v in values))))
    return rows


def parse_scontrol(text: str) -> Dict[str, str]:
    """``scontrol show job -o ID``: one line of ``Key=Value`` pairs.  A value may hold spaces
    (``Command=``, ``WorkDir=``, ``Reason=``...), so a pair starts only where a known-looking
    ``Key=`` follows a space: a word of letters, digits, ``:`` ``/`` and ``_`` then ``=``."""
    import re
    line = text.strip().splitlines()[0] if text.strip() else ""
    out: Dict[str, str] = {}
    matches = list(re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9:/_]*)=", line))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out.setdefault(m.group(1), line[m.end():end].strip())
    return out


def parse_sacct(text: str) -> List[Dict[str, str]]:
    """``sacct -n -X -P -o SACCT_FIELDS`` lines -> dicts with scontrol's key names."""
    names = {"JobID": "JobId", "State": "JobState", "NNodes": "NumNodes", "Submit": "SubmitTime",
             "Start": "StartTime", "End": "EndTime", "JobName": "JobName", "ExitCode": "ExitCode",
             "Reason": "Reason"}
    rows = []
    for line in text.splitlines():
        values = line.split("|")
        if len(values) == len(SACCT_FIELDS) and values[0].strip():
            rows.append({names[k]: v.strip() for k, v in zip(SACCT_FIELDS, values)})
    return rows


def raw_state(value: str) -> str:
    """Slurm's state word: ``CANCELLED by 1000`` (sacct) -> ``CANCELLED``; ``COMPLETING+`` -> ``COMPLETING``."""
    word = (value or "").strip().split(" ")[0] if value else ""
    return word.rstrip("+").upper()


@dataclass
class Partition:
    name: str
    available: str
    nodes: str
    default: bool


def parse_sinfo(text: str) -> List[Partition]:
    """``sinfo -h -o '%P|%a|%D'`` lines (``debug*`` marks the default partition)."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            name = parts[0]
            out.append(Partition(name.rstrip("*"), parts[1], parts[2], name.endswith("*")))
    return out
