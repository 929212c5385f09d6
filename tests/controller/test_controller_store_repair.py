"""A damaged state store keeps the controller's jobs: every plan, its attempts, its events and
its ledger row have a record in ``$CLOUDTRAIN_HOME/plans/`` (0600, rewritten atomically on every
change), and the store rebuilt after damage holds them again, so a job on a cloud (which has no
run directory) is still followed, listed and shown with its attempts."""
import json
import os
import stat

import pytest

from cloudtrain.runtime.store import Store
from cloudtrain.spec.errors import CloudtrainWarning

HANDLE = "sagemaker://us-east-1/digits-1"


def followed(store):
    store.ledger_put({"handle": HANDLE, "provider": "sagemaker", "job_id": "us-east-1/digits-1", "name": "digits",
                      "nodes": 2, "rate": 1.4, "currency": "USD", "submitted_at": 1.0, "state": "RUNNING"})
    store.plan_add({"handle": HANDLE, "state": "RUNNING", "step": "alive", "candidates": '["sagemaker", "azure"]',
                    "jobs": "{}", "max_restarts": 3}, detail="attempt 0 on sagemaker")
    store.attempt_add({"handle": HANDLE, "attempt": 0, "provider": "sagemaker", "attempt_handle": HANDLE,
                       "state": "running", "nodes": 2, "rate": 1.4, "currency": "USD", "started_at": 10.0})
    store.attempt_move(HANDLE, 0, "running", state="ended", ended_at=20.0, kind="preemption",
                       reason="preemption: MaxWaitTimeExceeded")
    store.plan_move(HANDLE, "RUNNING", event="recovering", detail="restarting on azure (1/3)", state="RECOVERING",
                    step="launching", preemptions=1)
    store.attempt_add({"handle": HANDLE, "attempt": 1, "provider": "azure", "attempt_handle": "azure://s/r/w/d-2",
                       "state": "running", "nodes": 2, "started_at": 30.0})
    store.ledger_update(HANDLE, state="RECOVERING", restarts=1)


def snapshot(store):
    return (store.plan_get(HANDLE), store.attempts(HANDLE), store.events(HANDLE),
            dict(store.ledger_rows("handle = ?", (HANDLE,))[0]))


@pytest.mark.parametrize("how", ["garbage", "deleted"])
def test_a_rebuilt_store_keeps_every_plan_with_its_attempts_events_and_ledger_row(home, how):
    store = Store()
    followed(store)
    before = snapshot(store)
    [record] = list((home / "plans").iterdir())
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE((home / "plans").stat().st_mode) == 0o700
    assert json.loads(record.read_text())["attempts"][1]["provider"] == "azure"
    db = home / "state.db"
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{db}{suffix}"):
            os.unlink(f"{db}{suffix}")
    if how == "garbage":
        db.write_bytes(os.urandom(db.stat().st_size or 4096))
        with pytest.warns(CloudtrainWarning, match="was damaged"):
            again = Store()
    else:
        db.unlink()
        again = Store()
    after = snapshot(again)
    assert after == before
    assert [p["handle"] for p in again.plans(unfinished=True)] == [HANDLE]
