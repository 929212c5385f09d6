"""``$CLOUDTRAIN_HOME`` (default ``~/.cloudtrain``): the user's own, whichever command makes it.

It holds the state store, the user config and every local or Docker run's logs, which are
the user's alone: the home and its ``runs/`` are 0700 and the store's files 0600 (see
docs/security.md, "Files cloudtrain keeps").  ``make_home`` is the one place that makes it.
"""
from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def home() -> Path:
    return Path(os.environ.get("CLOUDTRAIN_HOME") or Path.home() / ".cloudtrain").expanduser()


def private_dir(path: Path) -> Path:
    """``path`` made (with its parents) if missing, and readable by its owner only: a directory
    of ours made wider by an older cloudtrain, or by a umask, is narrowed."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    _narrow(path, PRIVATE_DIR)
    return path


def private_file(path: Path) -> Path:
    """``path`` created empty if missing, 0600 either way (made so before anything is written:
    SQLite gives a database's -wal and -shm files the database file's mode)."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE))
    _narrow(path, PRIVATE_FILE)
    return path


def narrow_if_present(path: Path) -> None:
    """``path`` made 0600 if it exists: never created, and gone meanwhile is fine (SQLite removes
    a store's -shm and -wal when its last connection closes, in whichever process that is)."""
    try:
        _narrow(path, PRIVATE_FILE)
    except FileNotFoundError:
        pass


def make_home() -> Path:
    """The home and its ``runs/``, made private; every command that writes there calls this."""
    root = private_dir(home())
    private_dir(root / "runs")
    return root


def _narrow(path: Path, mode: int) -> None:
    st = path.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o777 & ~mode:
        os.chmod(path, mode)
