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

The selection is ``cloudtrain.transfer.codetree``'s: a copy of the tree, never of what it points to (a
link travels as a link, its target never opened; FIFOs, sockets and devices stay out; credential
files stay home).  Packing and digesting stream: memory stays bounded whatever the file sizes,
and the archive is a private temporary file (``Archive``) the object stores upload from.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import stat
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, List, Optional, Tuple

from .codetree import CodeSelection

if TYPE_CHECKING:  # annotations only: no pydantic import for a module the supervisors use
    from ..spec.job import JobSpec

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


def selection(root: Path) -> CodeSelection:
    """The code directory's ``CodeSelection`` as shipped: without a stale launcher directory."""
    return CodeSelection(root, extra_ignored=(LAUNCHER_DIR,))


def code_files(root: Optional[Path]) -> Iterator[Tuple[str, Path]]:
    """(relative POSIX path, file or link) under ``root``, sorted: the selection of
    ``cloudtrain.transfer.codetree`` (ignore files, never VCS data, caches or credential files) without a
    stale launcher directory.  ``None`` (the job's ``code: null``: the image holds the code)
    selects nothing."""
    if root is None:
        return iter(())
    return selection(root).files()


def warn_about_code(job: JobSpec) -> List[str]:
    """Name, as warnings (once a process), the credential files kept home, the links that will
    dangle on the nodes and the special files left out (``codetree.warn_about``)."""
    from .codetree import warn_about
    if job.code_path is None or not job.code_path.is_dir():  # code_path is None iff code is
        return []
    return warn_about(selection(job.code_path))


CHUNK = 1 << 20  # bytes read at a time: packing and digesting hold about this much of a file
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _open_regular(path: Path):
    """``path`` opened for reading and its ``fstat``, or None when it is no longer a regular
    file (a FIFO or a link put there since the walk: never waited on, never followed)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        if os.path.islink(path):
            return None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb"), info


def code_digest(job: JobSpec) -> str:
    """sha256 over the shipped code's paths and contents (not the launcher's); a link counts by
    its text, its target is never read."""
    h = hashlib.sha256()
    for rel, path in code_files(job.code_path):
        if os.path.islink(path):
            entry = hashlib.sha256(b"symlink\0" + os.fsencode(os.readlink(path)))
        else:
            opened = _open_regular(path)
            if opened is None:
                continue
            entry = hashlib.sha256()
            with opened[0] as f:
                for chunk in iter(lambda: f.read(CHUNK), b""):
                    entry.update(chunk)
        h.update(rel.encode() + b"\0")
        h.update(entry.digest())
    return h.hexdigest()


def stage(job: JobSpec, dest, platforms: Iterable = ()) -> Path:
    """Copy the code to ``dest`` and write the launcher bundle to ``dest/.cloudtrain``.  A link
    stays a link when it leads to a staged file or directory; any other (out of the code
    directory, to a file left out, dangling) is left out: the staged directory is uploaded by an
    SDK that reads what a link points to."""
    import shutil
    from ..launch.bundle import write_bundle
    dest = Path(dest)
    links = []
    for rel, path in code_files(job.code_path):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(path):
            links.append((target, os.readlink(path)))
            continue
        opened = _open_regular(path)
        if opened is None:
            continue
        with opened[0] as f, open(target, "wb") as out:
            shutil.copyfileobj(f, out, CHUNK)
        target.chmod(opened[1].st_mode & 0o777)
    for target, link in links:  # after every file, so a link's own target is there to check
        os.symlink(link, target)
    top = os.path.realpath(dest)
    for target, _ in links:
        resolved = os.path.realpath(target)
        if not os.path.exists(resolved) or os.path.commonpath([top, resolved]) != top:
            os.unlink(target)
    write_bundle(dest / LAUNCHER_DIR, platforms)
    return dest


class Archive:
    """A packed archive: a private temporary file (removed when nothing holds this any more),
    its sha256 and size.  ``len()`` is the size; two are equal when their bytes are.  Upload it
    from ``path`` (``objectstore.upload_once`` does); ``read_bytes()`` for a small one."""

    def __init__(self, path: Path, sha256: str, size: int):
        self.path, self.sha256, self.size = Path(path), sha256, size
        weakref.finalize(self, _remove, str(self.path))

    def __len__(self) -> int:
        return self.size

    def __eq__(self, other) -> bool:
        return isinstance(other, Archive) and other.sha256 == self.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()

    def open(self):
        return open(self.path, "rb")

    def __repr__(self) -> str:
        return f"<Archive {self.size} bytes sha256:{self.sha256}>"


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


_spool: Optional[str] = None


def _spool_dir() -> str:
    """A directory of this process's own (0700) for its archives, removed at exit (``remove_spool``)."""
    global _spool
    if _spool is None or not os.path.isdir(_spool):
        import atexit
        import tempfile
        _spool = tempfile.mkdtemp(prefix="cloudtrain-pack-")
        atexit.register(remove_spool)
    return _spool


def remove_spool() -> None:
    """Remove this process's archives; the CLI calls it before its immediate exit (``os._exit``
    runs no ``atexit`` handler)."""
    global _spool
    if _spool is not None:
        import shutil
        shutil.rmtree(_spool, ignore_errors=True)
        _spool = None


def code_archive(job: JobSpec) -> Archive:
    """``archive(job, launcher=False)``: the code alone.  Raises ``FileNotFoundError`` when the
    code directory does not exist."""
    root = job.code_path
    if root is None or not root.is_dir():
        raise FileNotFoundError(str(root))
    return archive(job, launcher=False)


def packed_code(job: JobSpec) -> bytes:
    """``code_archive``'s bytes (a Kubernetes ConfigMap carries them: at most 900 KiB)."""
    return code_archive(job).read_bytes()


# gzip's own default: a 50 MB tree packs about 4x faster than at level 9, for about 1 % more bytes
COMPRESS_LEVEL = 6
_PACKED: dict = {}
_PACKING = threading.Lock()


def archive(job: JobSpec, platforms: Iterable = (), launcher: bool = True) -> Archive:
    """The code and the launcher bundle (under ``.cloudtrain/``) as a reproducible gzip'd tar,
    paths relative to the code directory.  ``launcher=False``: the code only (Kubernetes pods
    get the launcher from its own ConfigMap).  See ``packed``."""
    return packed(job, platforms, launcher)[0]


def _listing(files: List[Tuple[str, Path]]) -> tuple:
    out = []
    for rel, path in files:
        info = os.lstat(path)
        out.append((rel, stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns))
    return tuple(out)


def packed(job: JobSpec, platforms: Iterable = (), launcher: bool = True) -> Tuple[Archive, str]:
    """``archive`` and its sha256 (the name an object store keeps it under), remembered per code
    directory, file listing (path, type, size, mtime) and bundle: rendering and submitting a job,
    or many threads submitting the same code, pack it once in a process."""
    platforms = tuple(platforms)
    files = list(code_files(job.code_path))
    key = (str(job.code_path), _listing(files), tuple(map(repr, platforms)), launcher)
    with _PACKING:
        if key not in _PACKED:
            if len(_PACKED) > 8:
                _PACKED.clear()  # an archive still held elsewhere stays until it is dropped there
            done = _pack(files, platforms, launcher)
            _PACKED[key] = (done, done.sha256)
        return _PACKED[key]


class _Counted:
    """A binary file that hashes and counts what is written through it."""

    def __init__(self, raw):
        self.raw, self.sha256, self.size = raw, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


def _member(rel: str):
    import tarfile
    info = tarfile.TarInfo(rel)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def _add(tar, rel: str, path: Path) -> None:
    """One member: a link as a link (its text), a regular file streamed; nothing else."""
    import tarfile
    info = _member(rel)
    if os.path.islink(path):
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
        tar.addfile(info)
        return
    opened = _open_regular(path)
    if opened is None:
        return
    f, st = opened
    with f:
        info.size, info.mode = st.st_size, 0o755 if st.st_mode & 0o111 else 0o644
        tar.addfile(info, f)


def _pack(files: List[Tuple[str, Path]], platforms: tuple, launcher: bool) -> Archive:
    import gzip  # here, not at the top: most providers never build an archive
    import tarfile
    import tempfile
    from ..launch.bundle import write_bundle
    fd, name = tempfile.mkstemp(prefix="code-", suffix=".tar.gz", dir=_spool_dir())
    try:
        with tempfile.TemporaryDirectory(prefix="cloudtrain-ship-") as tmp, os.fdopen(fd, "wb") as raw:
            if launcher:
                bundle = write_bundle(Path(tmp), platforms)
                files = files + [(f"{LAUNCHER_DIR}/{rel}", path) for rel, path in code_files(bundle)]
            out = _Counted(raw)
            # filename="": the gzip header names no file (the temporary file's name would differ)
            with gzip.GzipFile(filename="", fileobj=out, mode="wb", mtime=0, compresslevel=COMPRESS_LEVEL) as gz, \
                    tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT,  # type: ignore[call-overload]
                                 copybufsize=CHUNK) as tar:  # (typeshed's overloads lack TarFile's copybufsize)
                for rel, path in files:
                    _add(tar, rel, path)
    except BaseException:
        _remove(name)
        raise
    return Archive(Path(name), out.sha256.hexdigest(), out.size)
