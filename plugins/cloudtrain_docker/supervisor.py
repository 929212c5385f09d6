"""The detached process that runs one Docker job: ``python -m cloudtrain_docker.supervisor RUN_DIR``.

It creates the job's network and containers from the rendered Engine API bodies, pumps their
logs, and removes everything the job created when it ends, fails or is cancelled; the generic
part (fail fast, restarts, cancel) is ``cloudtrain.runtime.supervise.Supervisor``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator, Optional

from cloudtrain.launch.exitcodes import EXIT_KILLED
from cloudtrain.runtime.supervise import Node, Supervisor
from cloudtrain.transfer.codetree import working_copies

from .provider import remove_labelled
from .render import LEASE


class ContainerNode(Node):
    def __init__(self, index: int, client, container_id: str):
        self.index, self.client, self.id = index, client, container_id
        self.code: Optional[int] = None
        self._waiter = threading.Thread(target=self._wait, daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        try:
            self.code = int(self.client.api.wait(self.id)["StatusCode"])
        except Exception:  # the container vanished (removed by cancel)
            self.code = EXIT_KILLED

    def lines(self) -> Iterator[str]:
        pending = b""
        try:
            for chunk in self.client.api.logs(self.id, stream=True, follow=True, stdout=True, stderr=True):
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    yield line.decode("utf-8", "replace") + "\n"
        except Exception:  # the container was removed while we read
            pass
        if pending:
            yield pending.decode("utf-8", "replace") + "\n"

    def poll(self) -> Optional[int]:
        return self.code

    def stop(self, grace: float) -> None:
        if self.code is None:
            try:
                self.client.api.stop(self.id, timeout=max(1, int(grace)))
            except Exception:
                pass
        self._waiter.join(timeout=grace + 10)


class DockerSupervisor(Supervisor):
    def __init__(self, run_dir: Path):
        super().__init__(run_dir)
        import docker
        self.client = docker.from_env()

    def prepare(self) -> None:
        self.hold_lease()
        working_copies(self.plan["code"],
                       [self.run_dir / f"node-{spec['node']}" / "code" for spec in self.plan["nodes"]])
        (self.run_dir / "output").mkdir(exist_ok=True)
        if self.plan["ssh"]:
            self.make_ssh_key()
        net = self.plan["network"]["content"]
        self.client.api.create_network(net["Name"], driver=net["Driver"], internal=net["Internal"],
                                       labels=net["Labels"], check_duplicate=net["CheckDuplicate"])

    def hold_lease(self) -> None:
        """The nodes' lease (``render.LEASE``): a FIFO this process alone holds open for writing,
        for as long as it lives.  Each node's entry.sh reads it and stops the node when it reads
        the end: the kernel closes this end when this process ends, whatever ends it (``kill -9``
        with the watchdog, an OOM kill of both), so no container outlives every process on the
        host that owns it.  A lease is a FIFO rather than a file refreshed on a clock: nothing
        to tune, no false expiry when the host is busy, and no process that must stay alive."""
        path = self.run_dir / LEASE
        if not path.exists():
            os.mkfifo(path, 0o600)
        os.chmod(path, 0o644)  # a node whose image runs as another user reads it too (the run dir is private)
        # O_RDWR: an open that does not wait for a reader (O_WRONLY would); never written to
        self._lease = os.open(path, os.O_RDWR | os.O_CLOEXEC)

    def make_ssh_key(self) -> None:
        """A key pair for this job only, made with the image's own ssh-keygen (or the host's)."""
        key_dir = self.run_dir / "ssh"
        key_dir.mkdir(mode=0o700)
        cmd = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"cloudtrain-{self.job_id}"]
        if shutil.which("ssh-keygen"):
            subprocess.run(cmd + ["-f", str(key_dir / "id_ed25519")], check=True)
        else:
            self.client.containers.run(self.plan["image"], cmd + ["-f", "/k/id_ed25519"], remove=True,
                                       network_mode="none", volumes={str(key_dir): {"bind": "/k", "mode": "rw"}})

    def start_node(self, spec: dict, attempt: int) -> Node:
        body = dict(spec["content"])
        body["Env"] = [*body["Env"], f"CLOUDTRAIN_RESTART_COUNT={attempt}"]
        name = spec["name"] + (f"-r{attempt}" if attempt else "")
        container = self.client.api.create_container_from_config(body, name)
        self.client.api.start(container["Id"])
        self.store.set_node(self.job_id, spec["node"], pid=None, exit_code=None)
        return ContainerNode(spec["node"], self.client, container["Id"])

    def stop_all(self) -> None:
        super().stop_all()
        for node in self.nodes:  # containers of a failed attempt go before the next one starts
            if not isinstance(node, ContainerNode):  # start_node makes only these
                continue
            try:
                self.client.api.remove_container(node.id, force=True)
            except Exception:
                pass

    def cleanup(self) -> None:
        remove_labelled(self.client, self.job_id)


def main() -> int:
    return DockerSupervisor(Path(sys.argv[1])).run()


if __name__ == "__main__":
    sys.exit(main())
