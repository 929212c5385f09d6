"""Ctrl-C (SIGINT) and SIGTERM at every instant of ``cloudtrain submit``, for real.

The instants are spread over the time a ``submit --detach`` of the same job takes on this
machine (measured first), and a little past it, into the following: whatever the instant, a job
that exists ends CANCELLED with reason ``interrupted`` and nothing of it is left running; a run
directory exists only for a recorded job.  ``--detach`` jobs are never cancelled by the CLI."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import cli_env, run_cli
from faultlib import job_processes, poll, sleeper_job

pytestmark = pytest.mark.e2e


def _terminal_default():
    """SIGINT as a terminal gives it (a background CI step inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _submit(job, *extra):
    return subprocess.Popen([sys.executable, "-m", "cloudtrain", "submit", str(job), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
                            preexec_fn=_terminal_default)


def _detach_time(job) -> float:
    """How long ``submit --detach`` takes here, start to exit (median of 3)."""
    times = []
    for _ in range(3):
        start = time.monotonic()
        handle = run_cli("submit", job, "--detach", check=0).stdout.strip()
        times.append(time.monotonic() - start)
        run_cli("cancel", handle, check=0)
    return sorted(times)[1]


def _jobs(home):
    return {j["handle"].split("://", 1)[1]: j
            for j in json.loads(run_cli("list", "-p", "local", "-o", "json", check=0).stdout)}


def _instants(span: float, count: int, past: float = 1.3):
    """``count`` instants from 0 to ``past`` times ``span``, evenly."""
    return [span * past * i / (count - 1) for i in range(count)]


def _interrupt_at(job, delay: float, sig: int, *extra):
    proc = _submit(job, *extra)
    time.sleep(delay)
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # a lost interrupt: say where the CLI waits, and what it said
        spy = os.path.join(os.path.dirname(sys.executable), "py-spy")  # the test extra's
        stacks = subprocess.run([spy, "dump", "--pid", str(proc.pid)], capture_output=True, text=True).stdout
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"submit still ran 120 s after {signal.Signals(sig).name} at {delay:.3f}s:\n"
                             f"{stacks}\nstderr:\n{err[-3000:]}") from None
    finally:
        proc.kill()
    return proc.returncode, out, err


@pytest.mark.parametrize("sig, count", [(signal.SIGINT, 20), (signal.SIGTERM, 6)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_at_any_instant_of_submit_cancels_the_job(tmp_path, home, sig, count):
    job = sleeper_job(tmp_path / "job")
    span = _detach_time(job)
    before = set(_jobs(home))
    seen = set(before)
    outcomes = []
    # up to twice a --detach's time: a followed submit does more before its job exists (the
    # status line, the log reader), and under the other worker's load 1.3 x fell short of it
    for delay in _instants(span, count, past=2.0):
        code, out, err = _interrupt_at(job, delay, sig)
        jobs = _jobs(home)
        new = set(jobs) - seen
        seen |= new
        assert len(new) <= 1, new
        # before Python's handlers are set the signal's default ends it, and during the
        # interpreter's own start-up (site) Python exits 1: either way nothing was made
        assert code in ((130,) if new else (130, -sig, 1)), f"at {delay:.3f}s: exit {code}\n{err}"
        for job_id in new:
            # the CLI returned only after the cancel: the state is final now, not eventually
            assert (jobs[job_id]["state"], jobs[job_id]["message"]) == ("CANCELLED", "interrupted"), \
                f"at {delay:.3f}s: {jobs[job_id]}\n{err}"
            assert run_cli("wait", f"local://{job_id}", timeout=60).returncode == 130
        runs = {p.name for p in (home / "runs").iterdir()} if (home / "runs").exists() else set()
        assert runs == set(jobs), f"at {delay:.3f}s: run dirs without a job: {runs - set(jobs)}"
        outcomes.append("job" if new else "none")
    # the instants reached both sides: before any job existed, and jobs that were made
    assert "job" in outcomes, outcomes  # the last instants come after a whole submit's time
    poll(lambda: not job_processes(home), bound=30)


def test_a_signal_during_submit_detach_leaves_the_job_running(tmp_path, home):
    job = sleeper_job(tmp_path / "job")
    span = _detach_time(job)
    seen = set(_jobs(home))
    made = 0
    for delay in _instants(span, 6, past=2.0):
        code, out, err = _interrupt_at(job, delay, signal.SIGINT, "--detach")
        jobs = _jobs(home)
        new = set(jobs) - seen
        seen |= new
        assert code in ((0, 130) if new else (130, -signal.SIGINT, 1)), err
        for job_id in new:
            made += 1
            assert out.strip() == f"local://{job_id}", (out, err)  # the handle is always printed
            poll(lambda job_id=job_id: run_cli("status", f"local://{job_id}", "-o", "json", check=0).stdout, bound=10)
            status = json.loads(run_cli("status", f"local://{job_id}", "-o", "json", check=0).stdout)
            assert status["state"] in ("PENDING", "STARTING", "RUNNING"), status
    assert made
    for job_id, row in _jobs(home).items():  # still running: the test ends them
        if row["state"] not in ("CANCELLED", "FAILED", "SUCCEEDED"):
            run_cli("cancel", f"local://{job_id}", check=0)
    poll(lambda: not job_processes(home), bound=30)
