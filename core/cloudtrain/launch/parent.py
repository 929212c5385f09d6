"""Children that do not outlive their parent (standard library only).

Its own module so that the local supervisor, which needs only this, does not import the
launcher (about 35 ms at every job start)."""
from __future__ import annotations

import signal

GROUPS_FILE = "groups"  # in $CLOUDTRAIN_LOG_DIR: "PGID START_TIME" of every group a node's launcher made


def die_with_parent(sig: int = signal.SIGKILL):
    """A ``preexec_fn``: the child gets ``sig`` when its parent dies, even killed outright (Linux)."""
    def preexec() -> None:
        try:
            import ctypes
            ctypes.CDLL(None).prctl(1, sig)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    return preexec
