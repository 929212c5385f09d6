"""Ports of local jobs: chosen outside the kernel's ephemeral range, and a taken port is reported
as such, first, before anything starts (issue 27, item 6)."""
import os
import re
import socket
import time

import pytest

from cloudtrain.spec.errors import BadInput
from cloudtrain_local.ports import ephemeral_range, free_port_block
from conftest import run_cli, write_job

RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def test_the_chooser_never_returns_a_port_inside_the_ephemeral_range():
    with open(RANGE_FILE) as f:
        low, high = (int(x) for x in f.read().split())
    assert ephemeral_range() == (low, high)
    for count in (2, 3, 4, 10):
        for _ in range(100):
            base = free_port_block(count)
            assert all(not low <= port <= high for port in range(base, base + count)), (base, count)


def test_the_chosen_port_is_one_a_job_file_may_name(monkeypatch):
    """The CI run of 2026-11-25 failed once: the chooser gave 65007, above the range any provider's
    master_port takes (1024-65000), so the job file the test wrote with it was refused (exit 2).
    With the ephemeral range pushed up to leave only 64991-65535, every base the chooser gives
    must still be a valid master_port."""
    from cloudtrain.spec.ports import HIGHEST_MASTER_PORT
    from cloudtrain_local import ports
    from cloudtrain_local.options import LocalOptions

    monkeypatch.setattr(ports, "ephemeral_range", lambda: (20000, 64990))
    for count in (2, 3, 5):
        chosen = {ports.free_port_block(count) for _ in range(60)}
        assert all(64991 <= base <= HIGHEST_MASTER_PORT for base in chosen), (count, sorted(chosen))
        assert all(LocalOptions(master_port=base).master_port == base for base in chosen)
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (20000, 65000))
    with pytest.raises(BadInput, match="no local ports outside the ephemeral range"):
        ports.free_port_block(2)


def test_off_linux_the_iana_dynamic_range_counts_as_ephemeral(tmp_path):
    assert ephemeral_range(str(tmp_path / "no-such-file")) == (49152, 65535)


def job_file(tmp_path, name, port, sleep):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(
        "import time, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "print('rank', dist.get_rank(), 'working', flush=True)\n"
        f"time.sleep({sleep})\n")
    return write_job(tmp_path, f"""
        name: {name}
        code: {code}
        command: python train.py
        distribution: {{type: ddp, nodes: 1, procs_per_node: 2}}
        env: {{OMP_NUM_THREADS: "1"}}
        providers: {{local: {{master_port: {port}}}}}
    """, name=f"{name}.yaml")


def refused(proc, port):
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} on 127.0.0.1 is in use" in lines[0], proc.stderr
    return lines[0]


@pytest.mark.e2e
def test_a_second_job_on_the_same_master_port_is_refused_up_front(tmp_path, home):
    port = free_port_block(2)
    first = run_cli("submit", job_file(tmp_path, "first", port, 120), "--detach", check=0).stdout.strip()
    job_log = home / "runs" / first.split("://", 1)[1] / "job.log"
    deadline = time.monotonic() + 120
    while not (job_log.exists() and job_log.read_text().count("working") == 2):
        assert time.monotonic() < deadline, "the first job never started"
        time.sleep(0.2)
    line = refused(run_cli("submit", job_file(tmp_path, "second", port, 1)), port)
    assert re.search(r"by pid \d+", line), line
    assert [p.name for p in (home / "runs").iterdir()] == [first.split("://", 1)[1]]  # nothing made
    run_cli("cancel", first, check=0)


def test_a_port_held_by_another_process_is_named_with_its_pid(tmp_path, home):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        line = refused(run_cli("submit", job_file(tmp_path, "held", port, 1)), port)
    finally:
        holder.close()
    assert f"by pid {os.getpid()}" in line
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
