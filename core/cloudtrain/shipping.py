"""Ship a job's code to a cloud, with the launcher inside it.

Cloud providers upload the job's ``code`` directory (SageMaker and TI-ONE to object storage as
an archive, Azure ML as a code asset, ModelArts to OBS).  They put the launcher bundle
(``cloudtrain.launch.bundle``) into the same upload under ``.cloudtrain/``, so each node runs
``python3 -m cloudtrain.launch`` from the code directory with nothing installed in the image but
Python 3.8+.

- ``node_command(job, platform)``: the node's start command as one shell line;
- ``stage(job, dest, platforms)``: a directory with the code and the bundle;
- ``archive(job, platforms)``: the same as a reproducible ``.tar.gz`` (same files, same
  bytes: no mtimes, owners or order from this machine), and ``code_digest(job)`` to name it.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, List, Optional, Tuple

from .codetree import CodeSelection

if TYPE_CHECKING:  # annotations only: no pydantic import for a module the supervisors use
    from .job import JobSpec

LAUNCHER_DIR = ".cloudtrain"


def launch_argv(job: JobSpec, platform: Optional[str] = None, python: str = "python3",
                sshd: bool = False) -> List[str]:
    """``python3 -m cloudtrain.launch [--platform P] [--sshd] <launch args> -- <command>``."""
    head = [python, "-m", "cloudtrain.launch"]
    if platform:
        head += ["--platform", platform]
    if sshd:
        head.append("--sshd")
    return [*head, *job.launch_args(), "--", *job.argv]


def node_command(job: JobSpec, platform: Optional[str] = None, python: str = "python3",
                 launcher_dir: str = LAUNCHER_DIR, sshd: bool = False) -> str:
    """One shell line that runs the shipped launcher from the code directory."""
    return with_launcher_path(launch_argv(job, platform, python, sshd), launcher_dir)


def launcher_path(launcher_dir: str = LAUNCHER_DIR) -> str:
    """The shell assignment that puts ``launcher_dir`` first on ``PYTHONPATH`` and keeps the
    image's own entries after it.  A container's environment replaces the image's variables
    (Ascend/CANN images need their ``PYTHONPATH``), so the launcher's directory is always
    prepended in the command, never set in a container's or request's environment."""
    return f'PYTHONPATH={shlex.quote(launcher_dir)}"${{PYTHONPATH:+:$PYTHONPATH}}"'


def with_launcher_path(argv: List[str], launcher_dir: str = LAUNCHER_DIR) -> str:
    """``argv`` as one shell line that finds the shipped launcher (see ``launcher_path``)."""
    return launcher_path(launcher_dir) + " " + shlex.join(argv)


def code_files(root: Optional[Path]) -> Iterator[Tuple[str, Path]]:
    """(relative POSIX path, file) under ``root``, sorted: the selection of ``cloudtrain.codetree``
    (ignore files, never VCS data or caches) without a stale launcher directory.  ``None`` (the
    job's ``code: null``: the image holds the code) selects nothing."""
    if root is None:
        return iter(())
    return CodeSelection(root, extra_ignored=(LAUNCHER_DIR,)).files()


def code_digest(job: JobSpec) -> str:
    """sha256 over the shipped code's paths and contents (not the launcher's)."""
    h = hashlib.sha256()
    for rel, path in code_files(job.code_path):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def stage(job: JobSpec, dest, platforms: Iterable = ()) -> Path:
    """Copy the code to ``dest`` and write the launcher bundle to ``dest/.cloudtrain``."""
    from .launch.bundle import write_bundle
    dest = Path(dest)
    for rel, path in code_files(job.code_path):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        target.chmod(path.stat().st_mode & 0o777)
    write_bundle(dest / LAUNCHER_DIR, platforms)
    return dest


def packed_code(job: JobSpec) -> bytes:
    """``archive(job, launcher=False)``: the code alone.  Raises ``FileNotFoundError`` when the
    code directory does not exist."""
    root = job.code_path
    if root is None or not root.is_dir():
        raise FileNotFoundError(str(root))
    return archive(job, launcher=False)


# gzip's own default: a 50 MB tree packs about 4x faster than at level 9, for about 1 % more bytes
COMPRESS_LEVEL = 6
_PACKED: dict = {}
_PACKING = threading.Lock()


def archive(job: JobSpec, platforms: Iterable = (), launcher: bool = True) -> bytes:
    """The code and the launcher bundle (under ``.cloudtrain/``) as a reproducible gzip'd tar,
    paths relative to the code directory.  ``launcher=False``: the code only (Kubernetes pods
    get the launcher from its own ConfigMap).  See ``packed``."""
    return packed(job, platforms, launcher)[0]


def packed(job: JobSpec, platforms: Iterable = (), launcher: bool = True) -> Tuple[bytes, str]:
    """``archive`` and its sha256 (the name an object store keeps it under), remembered per code
    directory, file listing (path, size, mtime) and bundle: rendering and submitting a job, or
    many threads submitting the same code, pack it once in a process."""
    platforms = tuple(platforms)
    files = list(code_files(job.code_path))
    listing = tuple((rel, path.stat().st_size, path.stat().st_mtime_ns) for rel, path in files)
    key = (str(job.code_path), listing, tuple(map(repr, platforms)), launcher)
    with _PACKING:
        if key not in _PACKED:
            if len(_PACKED) > 8:
                _PACKED.clear()
            data = _pack(files, platforms, launcher)
            _PACKED[key] = (data, hashlib.sha256(data).hexdigest())
        return _PACKED[key]


def _pack(files: List[Tuple[str, Path]], platforms: tuple, launcher: bool) -> bytes:
    import gzip  # here, not at the top: most providers never build an archive
    import io
    import tarfile
    import tempfile
    from .launch.bundle import write_bundle
    with tempfile.TemporaryDirectory(prefix="cloudtrain-ship-") as tmp:
        if launcher:
            bundle = write_bundle(Path(tmp), platforms)
            files = files + [(f"{LAUNCHER_DIR}/{rel}", path) for rel, path in code_files(bundle)]
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, path in files:
                info = tarfile.TarInfo(rel)
                data = path.read_bytes()
                info.size, info.mtime, info.mode = len(data), 0, 0o755 if os.access(path, os.X_OK) else 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=COMPRESS_LEVEL) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()
