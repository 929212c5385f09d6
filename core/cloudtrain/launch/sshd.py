"""Start this node's OpenSSH server, for ``mpirun``/``horovodrun`` on node 0 to reach it.

Platforms without an MPI operator (SageMaker, ModelArts Standard) start every node's command
and nothing else: a multi-node MPI job needs each node's sshd running and a key pair that all
nodes share (the image's, e.g. ``/root/.ssh/id_rsa`` with its public key in
``authorized_keys``).  Standard library only.
"""
from __future__ import annotations

import os
import subprocess
import sys

SSHD = "/usr/sbin/sshd"
SSHD_PORT = 22
# mpirun's ssh neither asks about nor records the other nodes' host keys (new on every job)
CLIENT_OPTIONS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"


def start_sshd() -> bool:
    """Start the image's sshd (it detaches itself); False, with a note, when it cannot."""
    if not (os.path.exists(SSHD) and hasattr(os, "geteuid") and os.geteuid() == 0):
        print("cloudtrain: no OpenSSH server to start (mpirun on node 0 needs to reach this node over "
              "ssh: use an image with openssh-server and a key pair shared by its nodes)", file=sys.stderr)
        return False
    try:
        os.makedirs("/run/sshd", exist_ok=True)
    except OSError:
        pass
    return subprocess.call([SSHD]) == 0
