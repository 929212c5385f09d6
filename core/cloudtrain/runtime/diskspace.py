"""A full disk under ``$CLOUDTRAIN_HOME``: how it is recognised, named and lived through.

Every write of the machine-local runtime (the state store, a run's directory, its logs) can
meet ENOSPC.  It becomes one ``DiskFull`` error naming the directory (the CLI: one line, exit
3), or a job that ends FAILED with ``disk full under <directory>``.  So that a supervisor can
still stop its job and say why on a disk that is full, every run keeps a small reserve file
(``.reserve``) that the supervisor gives back at the first ENOSPC and at the job's end.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from ..spec.errors import DiskFull

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
RESERVE = ".reserve"
RESERVE_BYTES = 256 * 1024  # the job's last words: a WAL and its index, job.json, job.log's last lines
NEARLY_FULL = 1024 * 1024   # an I/O error of SQLite's with less than this free is a full disk


def is_full(exc: BaseException) -> bool:
    """``exc`` is an OSError that says no space (or no quota) is left."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def nearly_full(path) -> bool:
    """Less than ``NEARLY_FULL`` bytes are free for an ordinary writer on ``path``'s file system."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < NEARLY_FULL


def where(path) -> Path:
    """The directory a full disk is named by: ``$CLOUDTRAIN_HOME`` for a path under it."""
    from ..input.homedir import home
    top = os.path.abspath(home())
    path = os.path.abspath(path)
    if path == top or path.startswith(top + os.sep):
        return Path(top)
    return Path(path if os.path.isdir(path) else os.path.dirname(path))


def full(path) -> DiskFull:
    """The error for ENOSPC met while writing ``path``."""
    return DiskFull(where(path))


def reserve(run_dir: Path) -> None:
    """Set ``RESERVE_BYTES`` aside in ``run_dir`` for the supervisor's last words (``DiskFull``
    if there is not that much room: a job that could not even say it failed is not started)."""
    path = Path(run_dir) / RESERVE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except (AttributeError, OSError) as exc:  # no fallocate here (macOS), or on this file system
            if isinstance(exc, OSError) and exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            data = b"\0" * RESERVE_BYTES
            while data:
                data = data[os.write(fd, data):]
    except OSError as exc:
        if is_full(exc):
            raise full(run_dir) from None
        raise
    finally:
        os.close(fd)


def give_back(run_dir: Path) -> bool:
    """Free the run's reserve; True if there was one."""
    try:
        os.unlink(Path(run_dir) / RESERVE)
        return True
    except FileNotFoundError:
        return False
