"""A broken state store (garbage, truncated to nothing, cut in half) with a job running in it:
the next command warns in one line, moves the file aside (state.db.corrupt-<time>) and rebuilds
the store from the run directories, so the job is still listed and can be cancelled.  And the
store takes several writing processes at once."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from conftest import run_cli, write_job
from tmpfs_home import jobs_ended, processes_in, wait_for  # noqa: F401 -- jobs_ended: a fixture


def damage(db, how):
    size = db.stat().st_size
    with open(db, "r+b") as f:
        if how == "garbage":
            f.write(os.urandom(size))
        else:
            f.truncate(0 if how == "empty" else size // 2)


def sleeper_job(tmp_path, provider):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "sleep.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    image = "image: cloudtrain/test-python:latest\n" if provider == "docker" else ""
    return write_job(tmp_path, textwrap.dedent("""\
        name: sleeper
        code: ./code
        command: python sleep.py
        distribution: {type: none, nodes: 2}
        """) + image)


def containers_of(job_id):
    import docker
    return docker.from_env().containers.list(all=True, filters={"label": f"cloudtrain.job={job_id}"})


def state_of(handle):
    proc = run_cli("status", handle, "-o", "json", timeout=60)
    return json.loads(proc.stdout)["state"] if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr}"


@pytest.mark.parametrize("provider,how", [("local", "garbage"), ("local", "empty"), ("local", "half"),
                                          ("docker", "garbage")])
def test_a_broken_store_is_moved_aside_and_rebuilt_with_the_running_job(tmp_path, jobs_ended, provider, how):
    home = jobs_ended
    handle = run_cli("submit", "-p", provider, sleeper_job(tmp_path, provider), "--detach", cwd=tmp_path,
                     check=0).stdout.strip()
    job_id = handle.split("://", 1)[1]
    run_dir = home / "runs" / job_id
    wait_for(lambda: state_of(handle) == "RUNNING" and "up" in (run_dir / "job.log").read_text(), timeout=60,
             what=f"{handle} runs", explain=lambda: state_of(handle))

    damage(home / "state.db", how)
    listed = run_cli("list", "-p", provider, "-o", "json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    warnings = listed.stderr.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("cloudtrain: warning: "), listed.stderr
    assert [(j["handle"], j["state"]) for j in json.loads(listed.stdout)] == [(handle, "RUNNING")]
    aside = [p.name for p in home.iterdir() if p.name.startswith("state.db.corrupt-")]
    assert len(aside) == 1 and aside[0] in warnings[0], (aside, warnings)
    assert (home / aside[0]).stat().st_mode & 0o777 == 0o600  # the jobs it held are the user's alone
    with sqlite3.connect(home / "state.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

    cancelled = run_cli("cancel", handle, timeout=120)
    assert cancelled.returncode == 0 and "CANCELLED" in cancelled.stdout, cancelled.stderr
    assert cancelled.stderr == ""  # the store was repaired once, by `list`
    wait_for(lambda: not processes_in(run_dir), timeout=15, what="no process of the job is left")
    if provider == "docker":
        assert containers_of(job_id) == []
    assert json.loads((run_dir / "job.json").read_text())["job"]["state"] == "CANCELLED"


WRITER = """
import sys, time
from pathlib import Path
from cloudtrain.runtime.store import Store
home, me, jobs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = Store()
for i in range(jobs):
    job = f"{me}-{i}"
    run_dir = home / "runs" / job
    run_dir.mkdir(parents=True)
    store.add_job(id=job, provider="local", name=me, nodes=2, run_dir=str(run_dir), state="PENDING")
    store.update_job(job, state="RUNNING", raw_state="RUNNING")
    for node in range(2):
        store.set_node(job, node, pid=1000 + node)
        store.set_node(job, node, exit_code=0)
    store.finish_job(job, "SUCCEEDED", exit_code=0)
"""


def test_several_processes_write_the_store_at_once(tmp_path, home):
    writers, jobs = 6, 15
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(home), f"w{w}", str(jobs)], env=env,
                              stderr=subprocess.PIPE, text=True) for w in range(writers)]
    errors = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, errors
    with sqlite3.connect(home / "state.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert (db.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()
                == [("SUCCEEDED", writers * jobs)])
        assert db.execute("SELECT count(*) FROM nodes WHERE exit_code = 0").fetchone() == (2 * writers * jobs,)
    records = [json.loads(p.read_text()) for p in (home / "runs").glob("*/job.json")]
    assert len(records) == writers * jobs and {r["job"]["state"] for r in records} == {"SUCCEEDED"}


def test_a_deleted_store_is_made_again_from_the_run_directories(tmp_path, jobs_ended):
    home = jobs_ended
    handle = run_cli("submit", "-p", "local", sleeper_job(tmp_path, "local"), "--detach", cwd=tmp_path,
                     check=0).stdout.strip()
    run_dir = home / "runs" / handle.split("://", 1)[1]
    wait_for(lambda: state_of(handle) == "RUNNING" and "up" in (run_dir / "job.log").read_text(), timeout=60,
             what=f"{handle} runs", explain=lambda: state_of(handle))
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        if (home / name).exists():
            (home / name).unlink()
    listed = run_cli("list", "-p", "local", "-o", "json", timeout=60)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert [(j["handle"], j["state"]) for j in json.loads(listed.stdout)] == [(handle, "RUNNING")]
    cancelled = run_cli("cancel", handle, timeout=120)
    assert cancelled.returncode == 0 and "CANCELLED" in cancelled.stdout, cancelled.stderr
    wait_for(lambda: not processes_in(run_dir), timeout=15, what="no process of the job is left")
