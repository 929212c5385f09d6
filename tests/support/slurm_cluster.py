"""A real two-node Slurm for the slurm provider's tests: ``scripts/slurm-cluster.sh`` started once a
session (munged, slurmctld, slurmd -N n1, slurmd -N n2 on 127.0.0.1, each with its own port,
spool directory and pid file; no slurmdbd, so no accounting) and stopped at its end, each daemon
by the PID it wrote, with a check that none is left running.  A test may kill a node's slurmd
(``kill_slurmd``); ``restore_slurmd`` starts it again, so the session's other tests keep two nodes."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "slurm-cluster.sh"


@dataclass
class SlurmCluster:
    directory: Path
    conf: Path

    @property
    def env(self) -> Dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def slurmd_pid(self, node: str) -> int:
        return int((self.directory / f"slurmd.{node}.pid").read_text().strip())

    def kill_slurmd(self, node: str) -> int:
        """The node fails: its slurmd is killed (SIGKILL, by its PID), the jobs' steps on it are left
        to find out; returns the PID, gone when this returns."""
        pid = self.slurmd_pid(node)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid), f"slurmd {node} ({pid}) outlived SIGKILL"
        return pid

    def restore_slurmd(self, node: str) -> None:
        """Start ``node``'s slurmd again unless it runs; returns when the controller has it back."""
        path = self.directory / f"slurmd.{node}.pid"
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit() and alive(int(text)):
            return
        done = subprocess.run(["bash", str(SCRIPT), "node", str(self.directory), node], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    def pids(self) -> List[int]:
        out = []
        for pidfile in sorted(self.directory.glob("*.pid")):
            text = pidfile.read_text().strip()
            if text.isdigit():
                out.append(int(text))
        return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("slurm")
    started = subprocess.run(["bash", str(SCRIPT), "start", str(directory)], capture_output=True, text=True,
                             timeout=120)
    cluster = SlurmCluster(directory, directory / "slurm.conf")
    pids = cluster.pids()
    try:
        assert started.returncode == 0, started.stderr + "".join(
            p.read_text(errors="replace")[-2000:] for p in directory.glob("*.log"))
        assert len(pids) == 4, pids  # munged, slurmctld, two slurmd
        previous = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(cluster.conf)
        try:
            yield cluster
        finally:
            if previous is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = previous
    finally:
        pids = sorted(set(pids) | set(cluster.pids()))  # with a slurmd a test restored
        subprocess.run(["bash", str(SCRIPT), "stop", str(directory)], capture_output=True, timeout=120)
        left = [pid for pid in pids if alive(pid)]
        assert not left, f"Slurm daemons still running after stop: {left}"
