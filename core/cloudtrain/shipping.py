"""Ship a job's code to a cloud, with the launcher inside it.

Cloud providers upload the job's ``code`` directory (SageMaker and TI-ONE to object storage as
an archive, Azure ML as a code asset, ModelArts to OBS).  They put the launcher bundle
(``cloudtrain.launch.bundle``) into the same upload under ``.cloudtrain/``, so each node runs
``python3 -m cloudtrain.launch`` from the code directory with nothing installed in the image but
Python 3.8+.

- ``node_command(job, platform)``: the node's start command as one shell line;
- ``stage(job, dest, detector_targets)``: a directory with the code and the bundle;
- ``archive(job, detector_targets)``: the same as a reproducible ``.tar.gz`` (same files, same
  bytes: no mtimes, owners or order from this machine), and ``code_digest(job)`` to name it.
"""
from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import os
import shlex
import tarfile
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Tuple

from .job import JobSpec

LAUNCHER_DIR = ".cloudtrain"
# Never shipped: VCS data, caches, virtual environments, and local outputs.
IGNORED = (".git", "__pycache__", "*.pyc", ".venv", "venv", ".tox", ".pytest_cache", ".mypy_cache",
           "output", LAUNCHER_DIR)


def launch_argv(job: JobSpec, platform: Optional[str] = None, python: str = "python3") -> List[str]:
    """``python3 -m cloudtrain.launch [--platform P] <launch args> -- <command>``."""
    head = [python, "-m", "cloudtrain.launch"]
    if platform:
        head += ["--platform", platform]
    return [*head, *job.launch_args(), "--", *job.argv]


def node_command(job: JobSpec, platform: Optional[str] = None, python: str = "python3",
                 launcher_dir: str = LAUNCHER_DIR) -> str:
    """One shell line that runs the shipped launcher from the code directory."""
    path = shlex.quote(launcher_dir)
    return (f'PYTHONPATH={path}"${{PYTHONPATH:+:$PYTHONPATH}}" '
            + shlex.join(launch_argv(job, platform, python)))


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORED)


def code_files(root: Path) -> Iterator[Tuple[str, Path]]:
    """(relative POSIX path, file) under ``root``, sorted, without the ignored names."""
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _ignored(d))
        for name in sorted(filenames):
            if not _ignored(name):
                path = Path(dirpath) / name
                yield path.relative_to(root).as_posix(), path


def code_digest(job: JobSpec) -> str:
    """sha256 over the shipped code's paths and contents (not the launcher's)."""
    h = hashlib.sha256()
    for rel, path in code_files(job.code_path):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def stage(job: JobSpec, dest, detector_targets: Iterable[str] = ()) -> Path:
    """Copy the code to ``dest`` and write the launcher bundle to ``dest/.cloudtrain``."""
    from .launch.bundle import write_bundle
    dest = Path(dest)
    for rel, path in code_files(job.code_path):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        target.chmod(path.stat().st_mode & 0o777)
    write_bundle(dest / LAUNCHER_DIR, detector_targets)
    return dest


def archive(job: JobSpec, detector_targets: Iterable[str] = ()) -> bytes:
    """The staged code as a reproducible gzip'd tar (paths relative to the code directory)."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="cloudtrain-ship-") as tmp:
        staged = stage(job, tmp, detector_targets)
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, path in code_files_with_launcher(staged):
                info = tarfile.TarInfo(rel)
                data = path.read_bytes()
                info.size, info.mtime, info.mode = len(data), 0, 0o755 if os.access(path, os.X_OK) else 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
            gz.write(raw.getvalue())
        return out.getvalue()


def code_files_with_launcher(root: Path) -> Iterator[Tuple[str, Path]]:
    """Like ``code_files`` but keeping ``.cloudtrain`` (the bundle) and skipping only caches."""
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith(".pyc"):
                path = Path(dirpath) / name
                yield path.relative_to(root).as_posix(), path
