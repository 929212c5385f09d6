"""The supervisor's doorbell: a follower wakes when a line is logged or the supervisor ends,
and the bell never reaches the job's nodes or fails the supervisor."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

from cloudtrain.runtime import doorbell
from cloudtrain.providers.hosted import follow_file
from conftest import run_cli


def test_a_follower_reads_a_line_when_the_bell_rings_not_at_its_next_poll(tmp_path, monkeypatch):
    log = tmp_path / "job.log"
    log.write_text("[node0/rank0] first\n")
    env: dict = {}
    read_end, write_end = doorbell.pair(env)
    monkeypatch.setenv(doorbell.ENV, env[doorbell.ENV])
    bell = doorbell.Bell.from_environ()
    got: list = []

    def follow():  # without the bell, the next read would come an hour later (check_every)
        for line in follow_file(log, done=lambda: False, check_every=3600,
                                bell=doorbell.Listener(read_end)):
            got.append(line)
            if line.startswith("[cloudtrain] job "):
                return

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    while not got:
        threading.Event().wait(0.01)
    with open(log, "a") as f:
        f.write("[cloudtrain] job succeeded\n")
    bell.ring()
    follower.join(60)
    assert not follower.is_alive(), "the follower slept through the bell"
    assert got == ["[node0/rank0] first\n", "[cloudtrain] job succeeded\n"]
    bell.close()


def test_the_supervisors_end_wakes_the_follower_and_closes_its_end():
    env: dict = {}
    read_end, write_end = doorbell.pair(env)
    listener = doorbell.Listener(read_end)
    os.close(write_end)  # the supervisor has ended
    listener.wait(3600)
    assert not listener.open


def test_ringing_with_nobody_listening_or_a_full_pipe_is_harmless(monkeypatch):
    env: dict = {}
    read_end, write_end = doorbell.pair(env)
    monkeypatch.setenv(doorbell.ENV, str(write_end))
    bell = doorbell.Bell.from_environ()
    for _ in range(100_000):  # far past a pipe's 64 KiB: the extra rings are dropped
        bell.ring()
    assert bell.fd == write_end
    os.close(read_end)  # the follower went away (--detach, Ctrl-C)
    bell.ring()
    assert bell.fd is None
    bell.ring()


def test_the_bell_is_taken_out_of_the_environment_and_never_inherited(monkeypatch):
    env: dict = {}
    read_end, write_end = doorbell.pair(env)
    os.set_inheritable(write_end, True)  # as pass_fds hands it to the supervisor
    monkeypatch.setenv(doorbell.ENV, str(write_end))
    bell = doorbell.Bell.from_environ()
    assert doorbell.ENV not in os.environ
    child = subprocess.run([sys.executable, "-c", f"import os; os.fstat({write_end})"], close_fds=False,
                           capture_output=True)
    assert child.returncode != 0  # EBADF: a node started by the supervisor has no write end
    bell.close()
    os.close(read_end)


def test_a_bell_number_that_is_not_open_here_gives_a_silent_bell(monkeypatch):
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    monkeypatch.setenv(doorbell.ENV, str(w))
    bell = doorbell.Bell.from_environ()
    assert bell.fd is None
    bell.ring()


def test_a_local_jobs_nodes_never_see_the_bell(tmp_path, home):
    (tmp_path / "job.yaml").write_text(
        "name: bell\ncode: .\ncommand: python show.py\ndistribution: {type: none, nodes: 2}\n")
    (tmp_path / "show.py").write_text(
        "import os\nprint('bell', os.environ.get('CLOUDTRAIN_LOG_BELL_FD', 'absent'))\n")
    out = run_cli("submit", "-p", "local", "job.yaml", cwd=tmp_path, check=0)
    assert out.stdout.count("bell absent") == 2
    assert "[cloudtrain] job succeeded" in out.stdout
