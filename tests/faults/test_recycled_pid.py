"""A PID of a job handed out again to an unrelated process, for real (``ns_last_pid``, as root).

The job's supervisor, its watchdog and its node are killed outright (as an OOM kill or a
machine's reboot would leave them: no word in the store), then an unrelated process of the user
takes the supervisor's PID and another takes the node's (each the leader of its own group, as a
shell's job is).  ``status`` must say the job FAILED and why, and neither ``status``, ``list``,
``cancel`` nor ``wait`` may signal those processes."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_env, run_cli
from faultlib import sleeper_job, spawn_victim

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # root: sets ns_last_pid, kills and hands out PIDs
SCENARIO = Path(__file__).parent / "recycle_scenario.py"


def test_a_recycled_pid_is_never_signalled_and_the_job_is_failed(tmp_path, home):
    """In a PID namespace of its own, so that the PIDs come round to the test's processes only
    (on a shared machine another's process could take them first)."""
    signals, report = tmp_path / "signals.txt", tmp_path / "report.json"
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(SCENARIO),
                           str(sleeper_job(tmp_path / "job")), str(signals), str(report)],
                          capture_output=True, text=True, env=cli_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(report.read_text())
    assert r["state_left"] == "RUNNING"  # what the store was left saying when all died unheard
    assert r["victim_pids"] == [r["supervisor"], r["node"]]  # the PIDs really came round
    assert r["status"]["state"] == "FAILED", r
    assert f"supervisor (pid {r['supervisor']}) is gone" in r["status"]["message"]
    assert r["list"] == ["FAILED"]
    assert r["wait"] == 1 and r["status_after"]["state"] == "FAILED"
    # the unrelated processes: alive (SIGKILL cannot be noted) and never signalled
    assert r["victims_alive"] == [True, True]
    assert not signals.exists(), signals.read_text()


def test_a_store_from_before_start_times_adopts_no_unrelated_pid(tmp_path, home):
    """An old store (no start-time columns) whose RUNNING job names a PID that an unrelated
    process holds now: the migration does not adopt it, so the job FAILS and the process is left
    alone."""
    import sqlite3
    import time
    signals = tmp_path / "signals.txt"
    victim = spawn_victim(signals)
    try:
        (home / "runs" / "old-000001").mkdir(parents=True)
        db = sqlite3.connect(home / "state.db")
        db.executescript("""
            CREATE TABLE jobs (id TEXT PRIMARY KEY, provider TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
                raw_state TEXT, message TEXT NOT NULL DEFAULT '', nodes INTEGER NOT NULL, nodes_up INTEGER NOT NULL
                DEFAULT 0, exit_code INTEGER, supervisor_pid INTEGER, run_dir TEXT NOT NULL, created_at REAL NOT NULL,
                started_at REAL, ended_at REAL);
            CREATE TABLE nodes (job_id TEXT NOT NULL, node INTEGER NOT NULL, pid INTEGER, exit_code INTEGER,
                PRIMARY KEY (job_id, node));
        """)
        db.execute("INSERT INTO jobs (id, provider, name, state, nodes, supervisor_pid, run_dir, created_at) "
                   "VALUES ('old-000001', 'local', 'old', 'RUNNING', 1, ?, ?, ?)",
                   (victim.pid, str(home / "runs" / "old-000001"), time.time()))
        db.execute("INSERT INTO nodes (job_id, node, pid) VALUES ('old-000001', 0, ?)", (victim.pid,))
        db.commit()
        db.close()
        run_cli("cancel", "local://old-000001", check=0)
        status = json.loads(run_cli("status", "local://old-000001", "-o", "json", check=0).stdout)
        assert status["state"] == "FAILED" and "is gone" in status["message"], status
        assert victim.poll() is None and not signals.exists()
    finally:
        victim.kill()
        victim.wait()


def test_a_job_whose_supervisor_never_started_fails_and_wait_returns(tmp_path, home):
    """A row with no supervisor PID (what an interrupted submit of an older cloudtrain left):
    ``wait`` does not hang on it; the job is FAILED with the reason."""
    import time
    from cloudtrain.runtime.store import Store
    (home / "runs" / "never-000001").mkdir(parents=True)
    store = Store(home / "state.db")
    store.add_job(id="never-000001", provider="local", name="never", nodes=1,
                  run_dir=str(home / "runs" / "never-000001"), state="PENDING")
    store.update_job("never-000001", created_at=time.time() - 60)
    assert run_cli("wait", "local://never-000001", timeout=60).returncode == 1
    status = json.loads(run_cli("status", "local://never-000001", "-o", "json", check=0).stdout)
    assert status["state"] == "FAILED" and "never started" in status["message"], status
