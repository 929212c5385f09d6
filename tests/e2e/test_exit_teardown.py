"""The DDP examples end without tearing gloo down at interpreter exit.

DDP (and DeepSpeed's engine) keep gloo's context alive after ``destroy_process_group``: its
socket-loop thread (``gloo_tcp_loop``) and work threads (``pt_gloo_runloop``) keep running,
with a connection to every peer.  A rank that then exits normally runs interpreter teardown
(atexit, module cleanup, C++ static destructors) while those threads run and its peers close
their sockets, which can abort a rank that finished its work ("terminate called without an
active exception", SIGABRT) and fail the job.  The examples leave with ``os._exit`` after the
barrier and ``destroy_process_group``.

The probe below is a ``sitecustomize`` that records, from an atexit hook (the start of
interpreter teardown), which threads the rank still has: a rank that reaches teardown with
gloo's threads running fails the test, whatever the timing."""
import os
import socket
import subprocess
import sys

import pytest

from conftest import EXAMPLES

pytestmark = pytest.mark.e2e

PROBE = '''
import atexit, os

def _threads_at_teardown():
    names = sorted(open("/proc/self/task/%s/comm" % t).read().strip() for t in os.listdir("/proc/self/task"))
    with open(os.path.join(os.environ["EXIT_PROBE_DIR"], "rank-" + os.environ.get("RANK", "x")), "w") as f:
        f.write("\\n".join(names))

if os.environ.get("EXIT_PROBE_DIR"):
    open(os.path.join(os.environ["EXIT_PROBE_DIR"], "loaded-" + os.environ.get("RANK", "x")), "w").close()
    atexit.register(_threads_at_teardown)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_digits_ddp_ranks_leave_without_tearing_gloo_down(tmp_path):
    probe_dir, records, output = tmp_path / "probe", tmp_path / "records", tmp_path / "output"
    probe_dir.mkdir()
    records.mkdir()
    (probe_dir / "sitecustomize.py").write_text(PROBE)
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
                   CLOUDTRAIN_OUTPUT_DIR=str(output), EXIT_PROBE_DIR=str(records),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(probe_dir), os.environ.get("PYTHONPATH")])))
        procs.append(subprocess.Popen([sys.executable, str(EXAMPLES / "digits-ddp" / "train.py"), "--epochs", "1"],
                                      cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank} exited with {p.returncode}:\n{out[-3000:]}"
    assert (output / "metrics.json").is_file() and "saved model.pt" in outs[0]
    assert {f.name for f in records.glob("loaded-*")} == {"loaded-0", "loaded-1"}  # the probe ran
    at_teardown = {f.name: f.read_text().split() for f in records.glob("rank-*")}
    gloo_alive = {rank: [t for t in threads if "gloo" in t] for rank, threads in at_teardown.items()}
    assert not any(gloo_alive.values()), f"ranks reached interpreter teardown with gloo running: {gloo_alive}"
