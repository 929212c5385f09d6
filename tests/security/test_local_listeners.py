"""A local job listens on loopback only, whatever its distribution type (issue 26, item 5).

Each case really runs a small job of one type with the local provider; while its ranks wait
for the test, every listening TCP socket and unbound-peer UDP socket of every process of the
job (found by ``CLOUDTRAIN_JOB_ID`` in its environment, so Ray's daemons and workers and
mpirun's ranks count) is read from ``/proc/<pid>/fd`` and ``/proc/<pid>/net/{tcp,tcp6,udp,udp6}``
(the process's own network namespace).  A socket passes when its address is a loopback one,
or when its namespace has no interface but ``lo`` (the local provider's contained jobs).
"""
import ipaddress
import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

from conftest import run_cli, write_job

pytestmark = pytest.mark.e2e

# /proc/net/* states: TCP LISTEN, UDP "CLOSE" (bound, not connected)
_LISTENING = {"tcp": "0A", "tcp6": "0A", "udp": "07", "udp6": "07"}


def _address(hexaddr):
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        text = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:
        text = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return text, int(port, 16)


def _socket_inodes(pid):
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(int(target[8:-1]))
    except OSError:
        pass
    return found


def _listening(pid):
    """{inode: (proto, address, port)} of the listening sockets in ``pid``'s network namespace."""
    table = {}
    for proto, state in _LISTENING.items():
        try:
            lines = Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == state:
                table[int(fields[9])] = (proto, *_address(fields[1]))
    return table


def _only_loopback_interface(pid):
    try:
        lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    except OSError:
        return False
    return [line.split(":")[0].strip() for line in lines] == ["lo"]


def job_processes(job_id):
    marker = f"CLOUDTRAIN_JOB_ID={job_id}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def listeners(job_id):
    """{(command, proto, address, port, reachable only from loopback)} of the job's processes."""
    out = set()
    for pid in job_processes(job_id):
        inodes = _socket_inodes(pid)
        if not inodes:
            continue
        table = _listening(pid)
        try:
            command = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        contained = _only_loopback_interface(pid)
        for inode in inodes & table.keys():
            proto, address, port = table[inode]
            out.add((command, proto, address, port, contained or ipaddress.ip_address(address).is_loopback))
    return out


WAIT = """
import os, time
def wait_for_test():
    print("ready", flush=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(os.environ["RELEASE"]) and time.monotonic() < deadline:
        time.sleep(0.2)
"""

SCRIPTS = {
    "ddp": """
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
wait_for_test()
dist.barrier()
""",
    "deepspeed": """
import deepspeed, torch.distributed as dist
deepspeed.init_distributed("gloo")
dist.barrier()
wait_for_test()
dist.barrier()
""",
    "mpi": """
from mpi4py import MPI
MPI.COMM_WORLD.allreduce(1)
wait_for_test()
MPI.COMM_WORLD.Barrier()
""",
    "ps-worker": """
import json
import torch.distributed.rpc as rpc
config = json.loads(os.environ["TF_CONFIG"])
ps, workers, task = config["cluster"]["ps"], config["cluster"]["worker"], config["task"]
rank = task["index"] + (0 if task["type"] == "ps" else len(ps))
rpc.init_rpc("n%d" % rank, rank=rank, world_size=len(ps) + len(workers),
             rpc_backend_options=rpc.TensorPipeRpcBackendOptions(init_method="tcp://" + ps[0]))
wait_for_test()
rpc.shutdown()
""",
    "ray": """
import ray
ray.init()
@ray.remote
def one():
    return 1
assert sum(ray.get([one.remote() for _ in range(4)])) == 4
wait_for_test()
""",
}

# (distribution block, ranks that print "ready")
CASES = {
    "ddp": ("{type: ddp, nodes: 2, procs_per_node: 2}", 4),
    "deepspeed": ("{type: deepspeed, nodes: 2, procs_per_node: 1}", 2),
    "mpi": ("{type: mpi, nodes: 2, procs_per_node: 1}", 2),
    "ps-worker": ("{type: ps-worker, nodes: 3, ps: 1}", 3),
    "ray": ("{type: ray, nodes: 2}", 1),
}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_every_listener_of_a_local_job_is_loopback_only(kind, home, tmp_path):
    distribution, ranks = CASES[kind]
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(WAIT + textwrap.dedent(SCRIPTS[kind]))
    release = tmp_path / "release"
    job = write_job(tmp_path, f"""
        name: listen-{kind}
        code: code
        command: python job.py
        distribution: {distribution}
        env: {{OMP_NUM_THREADS: "1", DS_ACCELERATOR: cpu, RELEASE: "{release}"}}
        """)
    proc = run_cli("submit", job, "-p", "local", "--detach", check=0)
    handle = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.split()[1]
    job_id = handle.split("://", 1)[1]
    log = home / "runs" / job_id / "job.log"
    seen = set()
    try:
        deadline = time.monotonic() + 600
        while True:  # bounded poll: every rank waits for the test, its servers up
            seen |= listeners(job_id)
            text = log.read_text() if log.exists() else ""
            if text.count("] ready") >= ranks:
                break
            assert "[cloudtrain] job" not in text, f"the job ended early:\n{text[-3000:]}"
            assert time.monotonic() < deadline, f"ranks not ready in time:\n{text[-3000:]}"
            time.sleep(0.3)
        seen |= listeners(job_id)
    finally:
        release.touch()
    assert seen, "no listening socket found in the job's processes"
    exposed = sorted(s[:4] for s in seen if not s[4])
    assert not exposed, f"{kind}: listening beyond loopback: {exposed}"
    run_cli("wait", handle, timeout=300, check=0)


def _ray_job(tmp_path, extra=""):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "job.py").write_text("print('ran', flush=True)\n")
    return write_job(tmp_path, f"""
        name: refused
        code: code
        command: python job.py
        distribution: {{type: ray, nodes: 2}}
        {extra}
        """)


def test_a_ray_job_is_refused_where_no_network_namespace_can_be_made(home, tmp_path):
    no_tools = tmp_path / "bin"  # no `unshare` on PATH: this machine cannot contain the job
    no_tools.mkdir()
    proc = run_cli("submit", _ray_job(tmp_path), "-p", "local", env={"PATH": str(no_tools)})
    assert proc.returncode == 2, proc.stderr
    assert "providers.local.isolate_network: false" in proc.stderr
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())


def test_isolate_network_false_runs_it_anyway_and_says_so(home, tmp_path):
    job = _ray_job(tmp_path, "providers: {local: {isolate_network: false}}")
    proc = run_cli("render", job, "-p", "local")
    assert proc.returncode == 0, proc.stderr
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    proc = run_cli("submit", job, "-p", "local", "--detach", env={"PATH": str(no_tools)})
    assert proc.returncode == 0, proc.stderr
    assert "listen on every interface" in proc.stderr
    run_cli("cancel", proc.stdout.strip().splitlines()[-1])
