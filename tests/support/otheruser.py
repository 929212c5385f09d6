"""A second, unprivileged local user for the shared-machine tests (issue 39): ``nobody``.

The tests run as root (CI's user, and this machine's); ``as_other_user`` runs a Python snippet
as ``nobody`` (``setpriv``: uid, gid and no supplementary groups), and ``shared_tmp`` is a
directory like ``/tmp`` (mode 1777: every user may create names there, and remove only their
own) for the victim's ``TMPDIR``, outside pytest's private ``tmp_path`` so the other user can reach it.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

OTHER = pwd.getpwnam("nobody")


def as_other_user(code: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``python3 -c code args...`` as ``nobody``; fails the test when it fails."""
    assert os.geteuid() == 0, "the shared-machine tests switch to a second user: they run as root (CI's user)"
    proc = subprocess.run(["setpriv", f"--reuid={OTHER.pw_uid}", f"--regid={OTHER.pw_gid}", "--clear-groups",
                           sys.executable, "-c", code, *args],
                          capture_output=True, text=True, timeout=60, env={"PATH": os.defpath})
    assert proc.returncode == 0, proc.stderr
    return proc


@contextmanager
def shared_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ct-shared-", dir="/tmp"))
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
