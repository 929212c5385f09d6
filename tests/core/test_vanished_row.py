"""A local job whose supervisor is gone, and whose store row another process removes (``cloudtrain
prune``, another submit's run retention) while ``status`` or ``list`` reconciles it: ``status``
says the job is not found (exit 2, one line) and ``list`` leaves it out; neither is a traceback."""
from __future__ import annotations

import subprocess
import time
import types

import pytest

from cloudtrain.providers import hosted
from cloudtrain.spec.errors import JobNotFound
from cloudtrain_local.provider import LocalProvider

JOB = "vanished-0a1b2c"


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def removed_while_reconciled(home, monkeypatch):
    """A RUNNING row whose supervisor is gone; the reconciler's pause (the supervisor's last
    write may be on its way) is when the other process removes the row."""
    provider = LocalProvider()
    run_dir = home / "runs" / JOB
    run_dir.mkdir(parents=True)
    provider.store.add_job(id=JOB, provider="local", name="vanished", nodes=1, run_dir=str(run_dir),
                           state="RUNNING", supervisor_pid=dead_pid(), supervisor_start=1)

    def removed_meanwhile(seconds):
        provider.store.forget_job(JOB)

    monkeypatch.setattr(hosted, "time", types.SimpleNamespace(time=time.time, monotonic=time.monotonic,
                                                              sleep=removed_meanwhile))
    return provider


def test_status_of_a_job_whose_row_goes_while_reconciled_is_not_found(removed_while_reconciled):
    with pytest.raises(JobNotFound) as caught:
        removed_while_reconciled.status(JOB)
    assert caught.value.exit_code == 2 and JOB in str(caught.value)


def test_list_leaves_out_a_job_whose_row_goes_while_reconciled(removed_while_reconciled):
    assert [s.handle for s in removed_while_reconciled.list()] == []
