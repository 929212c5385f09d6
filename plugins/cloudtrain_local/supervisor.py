"""The detached process that runs one local job: ``python -m cloudtrain_local.supervisor RUN_DIR``.

Every node is ``cloudtrain launch`` in its own process group and its own copy of the code;
the generic part (logs, fail fast, restarts, cancel) is ``cloudtrain.runtime.supervise.Supervisor``.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

from cloudtrain.runtime import procs
from cloudtrain.launch.parent import die_with_parent
from cloudtrain.transfer.codetree import working_copies
from cloudtrain.runtime.supervise import Node, Supervisor, TORCHRUN_DIR, scrub_torchrun_files


class ProcessNode(Node):
    """A node as a process group: ``cloudtrain launch`` and everything it starts."""

    def __init__(self, index: int, proc: subprocess.Popen, started: Optional[int]):
        self.index, self.proc, self.started = index, proc, started

    def lines(self) -> Iterator[str]:
        assert self.proc.stdout is not None  # started with stdout=PIPE
        for raw in iter(self.proc.stdout.readline, b""):
            yield raw.decode("utf-8", "replace")

    def poll(self) -> Optional[int]:
        return self.proc.poll()

    def wait(self, timeout: float) -> Optional[int]:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float) -> None:
        if self.proc.poll() is None:
            procs.signal_group(self.proc.pid, self.started, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        # also what is left in the group; once the leader is reaped, its PID may be another's
        procs.signal_group(self.proc.pid, self.started, signal.SIGKILL)
        self.proc.wait()


class LocalSupervisor(Supervisor):
    def prepare(self) -> None:
        if self.plan["copy_code"]:
            working_copies(self.plan["code"], [Path(spec["cwd"]) for spec in self.plan["nodes"]])
        (self.run_dir / "output").mkdir(exist_ok=True)

    def start_node(self, spec: dict, attempt: int) -> Node:
        env = {k: v for k, v in os.environ.items() if k not in self.secrets and k != "CLOUDTRAIN_SECRET_NAMES"}
        env.update(spec["env"])
        env.update(self.secrets)
        env["CLOUDTRAIN_RESTART_COUNT"] = str(attempt)
        proc = subprocess.Popen(spec["argv"], cwd=spec["cwd"], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                # SIGTERM, not SIGKILL: the node's launcher then stops its own children
                                preexec_fn=die_with_parent(signal.SIGTERM))
        started = procs.start_time(proc.pid)
        procs.record(self.run_dir, f"node-{spec['node']}", proc.pid, started)
        self.store.set_node(self.job_id, spec["node"], pid=proc.pid, pid_start=started, exit_code=None)
        return ProcessNode(spec["node"], proc, started)

    def stop_all(self) -> None:
        """Every attempt's nodes stopped, torchrun's files of that attempt are scrubbed: its own
        per-rank logs (--tee needs them) are unmasked and removed, its error files masked."""
        super().stop_all()
        scrub_torchrun_files(self.run_dir, self.sink.mask)

    def cleanup(self) -> None:
        """Only our (masked) logs are kept."""
        scrub_torchrun_files(self.run_dir, self.sink.mask)
        for spec in self.plan["nodes"]:
            shutil.rmtree(self.run_dir / f"node-{spec['node']}" / TORCHRUN_DIR, ignore_errors=True)


def main() -> int:
    return LocalSupervisor(Path(sys.argv[1])).run()


if __name__ == "__main__":
    sys.exit(main())
