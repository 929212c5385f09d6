"""One controller per CLOUDTRAIN_HOME: real processes.  Two started at once: one runs, the other
ends at once saying who runs; ``controller status`` names it (pid and start time), ``controller
stop`` ends it; a detached controller ends by itself when nothing is left to follow; after a
reboot (no controller, a plan unfinished) the next command starts one.  Every process a test
starts is stopped by its PID, and the test shows none is left."""
import json
import os
import signal
import subprocess
import sys
import time

from cloudtrain.orchestrate import controller
from cloudtrain.runtime import procs
from cloudtrain.runtime.store import Store
from conftest import cli_env, run_cli


def start(*args):
    return subprocess.Popen([sys.executable, "-m", "cloudtrain", "controller", *args], env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def claimed(timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = controller.claim()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("no controller claimed the home")


def stopped(proc, timeout=60):
    try:
        return proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_controllers_started_at_once_one_runs(home):
    first, second = start(), start()
    try:
        winner = claimed()
        assert winner["pid"] in (first.pid, second.pid)
        assert winner["start"] == procs.start_time(winner["pid"])
        loser = second if winner["pid"] == first.pid else first
        assert stopped(loser) == 1
        assert f"another controller runs for this home (pid {winner['pid']})" in loser.stderr.read()
        assert oct((home / controller.CLAIM_NAME).stat().st_mode & 0o777) == "0o600"
        status = json.loads(run_cli("controller", "status", "-o", "json", check=0).stdout)
        assert status["controller"]["pid"] == winner["pid"] and status["following"] == []
        assert f"controller {winner['pid']} stopping" in run_cli("controller", "stop", check=0).stdout
        proc = first if winner["pid"] == first.pid else second
        assert stopped(proc) == 0
        assert controller.claim() is None and not (home / controller.CLAIM_NAME).exists()
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
    assert first.poll() is not None and second.poll() is not None


def test_a_detached_controller_ends_when_nothing_is_left(home):
    proc = start("--detached")
    assert stopped(proc) == 0
    assert "nothing left to follow; ending" in proc.stderr.read()


def test_after_a_reboot_the_next_command_starts_the_controller_for_an_unfinished_job(home, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", cli_env()["PYTHONPATH"])  # the controller it starts imports what this test does
    store = Store()
    # a plan whose current attempt is a local job that has ended: the controller reads it and finishes the plan
    store.add_job(id="gone-1", provider="local", name="gone", nodes=1, run_dir=str(home / "runs" / "gone-1"),
                  state="SUCCEEDED")
    store.plan_add({"handle": "local://gone-1", "state": "RUNNING", "step": "alive", "candidates": '["local"]',
                    "jobs": "{}", "restarts_itself": 1})
    store.attempt_add({"handle": "local://gone-1", "attempt": 0, "provider": "local",
                       "attempt_handle": "local://gone-1", "state": "running"})
    pid = controller.ensure_running(store)
    assert pid is not None
    try:
        deadline = time.monotonic() + 120
        while store.plan_get("local://gone-1")["state"] != "SUCCEEDED" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.plan_get("local://gone-1")["state"] == "SUCCEEDED"
        while procs.start_time(pid) is not None and time.monotonic() < deadline:  # it ends by itself
            time.sleep(0.1)
        assert procs.start_time(pid) is None
    finally:
        if procs.start_time(pid) is not None:
            os.kill(pid, signal.SIGKILL)
    assert "nothing left to follow" in (home / controller.LOG_NAME).read_text()
