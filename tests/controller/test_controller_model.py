"""Issue 41 step 1: the job fields the controller reads (restart_on, stall_timeout, max_cost),
and the store's plans, attempts and events with compare-and-set transitions."""
import pytest

from cloudtrain.input.loading import load_job
from cloudtrain.runtime.store import StaleTransition, Store
from cloudtrain.spec.errors import JobFileError
from cloudtrain.spec.job import ExitCodes
from conftest import write_job

JOB = "name: t\ncommand: python train.py\n"


def test_restart_on_defaults_to_the_four_kinds_and_takes_exit_codes(tmp_path):
    assert load_job(write_job(tmp_path, JOB)).restart_on == ["preemption", "capacity", "node-failure", "hang"]
    job = load_job(write_job(tmp_path, JOB + "restart_on: [preemption, {exit-codes: [3, 75]}]\n"))
    assert job.restart_on == ["preemption", ExitCodes(exit_codes=[3, 75])]
    assert job.restart_exit_codes == [3, 75]


@pytest.mark.parametrize("text,line,field,words", [
    ("restart_on: [preemtion]\n", 3, "restart_on", "preemtion"),
    ("restart_on: [{exit-codes: [0]}]\n", 3, "restart_on", "1-255"),
    ("restart_on: [hang, hang]\n", 3, "restart_on", "once"),
    ("max_cost: lots\n", 3, "max_cost", "not an amount"),
    ("max_cost: -5\n", 3, "max_cost", "more than 0"),
    ("stall_timeout: soon\n", 3, "stall_timeout", "not a duration"),
])
def test_bad_values_name_the_file_line_and_field(tmp_path, text, line, field, words):
    path = write_job(tmp_path, JOB + text)
    with pytest.raises(JobFileError) as info:
        load_job(path)
    said = str(info.value)
    assert said.startswith(f"{path}:{line}: {field}"), said
    assert words in said


def test_max_cost_keeps_its_currency_and_stall_timeout_is_seconds(tmp_path):
    job = load_job(write_job(tmp_path, JOB + "max_cost: 500 usd\nstall_timeout: 30m\n"))
    assert (job.budget.amount, job.budget.currency, job.max_cost) == (500.0, "USD", "500 USD")
    assert job.stall_timeout == 1800 and job.launch_args()[-2:] == ["--stall-timeout", "1800"]
    plain = load_job(write_job(tmp_path, JOB + "max_cost: 3000\n"))
    assert (plain.budget.amount, plain.budget.currency) == (3000.0, None)


def test_stall_timeout_is_refused_where_the_launcher_does_not_watch(tmp_path):
    with pytest.raises(JobFileError, match="stall_timeout"):
        load_job(write_job(tmp_path, JOB + "distribution: {type: mpi}\nstall_timeout: 5m\n"))


def plan(store, handle="tione://r/train-1", state="PENDING"):
    store.plan_add({"handle": handle, "state": state, "step": "waiting", "candidates": "[]", "jobs": "{}"})
    return handle


def test_a_transition_from_another_state_fails_loudly_and_writes_nothing(tmp_path):
    store = Store(tmp_path / "state.db")
    handle = plan(store)
    store.plan_move(handle, "PENDING", event="running", state="RUNNING", step="alive")
    before = store.events(handle)
    with pytest.raises(StaleTransition, match="expected state PENDING, found RUNNING"):
        store.plan_move(handle, "PENDING", event="recovering", state="RECOVERING", failures=1)
    row = store.plan_get(handle)
    assert (row["state"], row["failures"]) == ("RUNNING", 0)
    assert store.events(handle) == before and [e["event"] for e in before] == ["submitted", "running"]
    with pytest.raises(StaleTransition, match="no plan"):
        store.plan_move("tione://r/none", "PENDING", state="RUNNING")


def test_an_attempt_number_is_taken_once_and_its_moves_are_guarded(tmp_path):
    store = Store(tmp_path / "state.db")
    handle = plan(store)
    row = {"handle": handle, "attempt": 1, "provider": "tione", "state": "submitting"}
    store.attempt_add(row)
    with pytest.raises(StaleTransition, match="attempt 1 exists"):
        store.attempt_add(row)
    store.attempt_move(handle, 1, "submitting", state="running", attempt_handle="tione://r/train-2")
    with pytest.raises(StaleTransition):
        store.attempt_move(handle, 1, "submitting", state="running", attempt_handle="tione://r/train-3")
    assert store.attempts(handle)[0]["attempt_handle"] == "tione://r/train-2"
    assert store.plan_of_attempt("tione://r/train-2") == handle
    assert store.plan_add({"handle": handle, "state": "PENDING", "step": "waiting", "candidates": "[]",
                           "jobs": "{}"}) is False  # one plan per handle
