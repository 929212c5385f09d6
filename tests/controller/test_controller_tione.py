"""The controller against TI-ONE's double (tests/doubles/tione_double.py, driven through the real
tencentcloud SDK): TI-ONE does not restart a task (CreateTrainingTaskRequest has no restart or
retry field, tencentcloud-sdk-python tione/v20211111/models.py), so the controller submits the
job again after a failure ``restart_on`` covers; the next attempt is the same spec with
``CLOUDTRAIN_RESTART_COUNT``, found by its spec hash before anything is sent again."""
import json

import pytest
from tencentcloud.common.credential import Credential

from cloudtrain.api import controller as make_controller
from cloudtrain.input.loading import job_from_dict
from cloudtrain.orchestrate import controller
from cloudtrain.runtime.store import Store
from conftest import run_cli
from doubles.tione_double import SECRET_ID, SECRET_KEY, FakeTione

from cloudtrain_tione.provider import TioneProvider

OPTIONS = {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
           "code_source": "cos://train-1250000000/code/lc/"}
# TI-ONE's error code for sold-out resources (tencentcloud/tione/v20211111/errorcodes.py), as a
# task's FailureReason says it
CAPACITY_WORDS = "ResourceInsufficient: 资源不足"


class PricedTione(FakeTione):
    """TI-ONE's double with DescribeBillingSpecsPrice (TotalCost in fen per hour, as
    tests/plugins/tione/test_tione_prices.py pins it): the catalog gets a rate."""

    def DescribeBillingSpecsPrice(self, body: dict) -> dict:
        return {"SpecsPrice": [{"SpecName": u["SpecName"], "SpecCount": u["SpecCount"],
                                "TotalCost": 120 * u["SpecCount"], "RealTotalCost": 120 * u["SpecCount"]}
                               for u in body["SpecsParam"]]}


@pytest.fixture
def fake(home):
    """TI-ONE's double, and the user's catalog refreshed from it (TI.S.LARGE.POST at 1.20 CNY/h)."""
    with PricedTione() as server:
        server.billing_specs = [{"SpecId": "sv_tione_tr_s", "SpecName": "TI.S.LARGE.POST", "SpecAlias": "4C8G",
                                 "Available": True, "AvailableRegion": []}]
        run_cli("catalog", "refresh", "-p", "tione", check=0,
                env={"TENCENTCLOUD_SECRET_ID": SECRET_ID, "TENCENTCLOUD_SECRET_KEY": SECRET_KEY,
                     "CLOUDTRAIN_TIONE_ENDPOINT": server.url, "TENCENTCLOUD_REGION": "ap-shanghai"})
        server.calls.clear()
        yield server
    assert not server.bad_requests, server.bad_requests


def provider(fake):  # noqa: F811
    return TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=fake.url, poll=0)


def make_job(tmp_path, **overrides):
    code = tmp_path / "code"
    if not code.exists():
        code.mkdir()
        (code / "train.py").write_text("print('hi')\n")
    data = {"name": "lc", "code": str(code), "command": "python train.py", "image": "img:1",
            "distribution": {"type": "ddp", "nodes": 2},
            "max_restarts": 2, "providers": {"tione": dict(OPTIONS)}}
    data.update(overrides)
    return job_from_dict(data)


def submitted(fake, tmp_path, **overrides):  # noqa: F811
    """Attempt 0 sent as submit sends it, and the plan submit leaves."""
    p = provider(fake)
    rendered = p.render(make_job(tmp_path, **overrides))
    run = p.submit(rendered)
    store = Store()
    assert controller.adopt(run.handle, [rendered], store=store)
    return run, store, make_controller(store=store, poll=0, provider_for=lambda name, profile: provider(fake))


def fails(fake, run, words):  # noqa: F811
    task = fake.tasks[run.id.split("/")[-1]]
    task.update(script=["RUNNING", "FAILED"], FailureReason=words, step=0)


def created(fake):  # noqa: F811
    return fake.bodies("CreateTrainingTask")


def test_a_capacity_failure_is_restarted_with_the_restart_count(fake, tmp_path, home):  # noqa: F811
    run, store, c = submitted(fake, tmp_path)
    fails(fake, run, CAPACITY_WORDS)
    for _ in range(6):
        c.tick()
    plan = store.plan_get(run.handle)
    assert plan["state"] in ("PENDING", "STARTING", "RUNNING") and plan["preemptions"] == 1, plan
    assert len(created(fake)) == 2
    envs = {e["Name"]: e["Value"] for e in created(fake)[1]["Envs"]}
    assert envs["CLOUDTRAIN_RESTART_COUNT"] == "1" and "CLOUDTRAIN_RESTART_COUNT" not in {
        e["Name"] for e in created(fake)[0]["Envs"]}
    for _ in range(10):
        c.tick()
    plan = store.plan_get(run.handle)
    assert plan["state"] == "SUCCEEDED", plan
    view = controller.attempts_view(run.handle, store)
    assert [a["attempt"] for a in view] == [0, 1] and view[0]["handle"] == run.handle
    assert view[0]["reason"].startswith("capacity: ResourceInsufficient") and view[1]["handle"] != run.handle
    assert all(a["cost"] is not None and a["cost"] > 0 for a in view)  # the catalog's rate x nodes x hours
    assert [e["event"] for e in store.events(run.handle)][:3] == ["submitted", "running", "recovering"]


def test_a_failure_of_the_users_code_is_not_restarted_unless_restart_on_names_its_code(fake, tmp_path, home):  # noqa: F811
    run, store, c = submitted(fake, tmp_path)
    fails(fake, run, "node 0 rank 0 exited with code 3: ValueError")
    for _ in range(4):
        c.tick()
    plan = store.plan_get(run.handle)
    assert plan["state"] == "FAILED" and "restart_on does not cover it" in plan["reason"]
    assert len(created(fake)) == 1

    run, store, c = submitted(fake, tmp_path, name="lc-codes", restart_on=[{"exit-codes": [3]}])
    fails(fake, run, "node 0 rank 0 exited with code 3: ValueError")
    for _ in range(4):
        c.tick()
    assert store.plan_get(run.handle)["failures"] == 1 and len(created(fake)) == 3


def test_the_budget_of_restarts_is_kept_and_ends_the_job(fake, tmp_path, home):  # noqa: F811
    run, store, c = submitted(fake, tmp_path, max_restarts=1)
    fails(fake, run, CAPACITY_WORDS)
    for _ in range(4):
        c.tick()
    second = store.attempts(run.handle)[-1]
    assert second["attempt"] == 1
    task = fake.tasks[second["attempt_handle"].split("/")[-1]]
    task.update(script=["RUNNING", "FAILED"], FailureReason=CAPACITY_WORDS, step=0)
    for _ in range(4):
        c.tick()
    plan = store.plan_get(run.handle)
    assert plan["state"] == "FAILED" and "max_restarts (1) preemptions were used" in plan["reason"]
    assert len(created(fake)) == 2


def test_a_controller_killed_while_sending_an_attempt_finds_it_and_sends_nothing_twice(fake, tmp_path, home,  # noqa: F811
                                                                                       monkeypatch):
    run, store, c = submitted(fake, tmp_path)
    fails(fake, run, CAPACITY_WORDS)
    real_move = store.attempt_move

    class Killed(BaseException):
        """The controller's process ends here: after the platform took attempt 1, before the store knew."""

    def dies_after_sending(handle, attempt, expected, **fields):
        if attempt == 1 and fields.get("attempt_handle"):
            raise Killed()
        return real_move(handle, attempt, expected, **fields)
    monkeypatch.setattr(store, "attempt_move", dies_after_sending)
    with pytest.raises(Killed):
        for _ in range(4):
            c.tick()
    assert len(created(fake)) == 2  # attempt 1 reached the platform
    assert store.attempts(run.handle)[-1]["state"] == "submitting"  # the store does not know its id
    monkeypatch.setattr(store, "attempt_move", real_move)

    again = make_controller(store=Store(), poll=0, provider_for=lambda name, profile: provider(fake))
    assert "look up and send attempt 1" in controller.describe(again.store)["following"][0]["next"]
    for _ in range(10):
        again.tick()
    assert len(created(fake)) == 2  # found by its spec hash: none sent twice
    rows = again.store.attempts(run.handle)
    assert [r["attempt"] for r in rows] == [0, 1] and rows[1]["attempt_handle"]
    assert again.store.plan_get(run.handle)["state"] == "SUCCEEDED"  # none lost


def test_max_cost_reached_cancels_the_job(fake, tmp_path, home):  # noqa: F811
    # the double's task started at 2025-11-20T08:00:30Z: 2 nodes x the catalog's rate since then
    run, store, c = submitted(fake, tmp_path, max_cost="1 CNY")
    task = fake.tasks[run.id.split("/")[-1]]
    task.update(script=["RUNNING"], step=0)
    for _ in range(3):
        c.tick()
    plan = store.plan_get(run.handle)
    assert plan["state"] == "CANCELLED" and plan["reason"] == "max_cost 1 CNY reached", plan
    assert "StopTrainingTask" in fake.actions()
    assert store.attempts(run.handle)[0]["reason"] == "max_cost 1 CNY reached"


def test_max_runtime_is_enforced_where_tione_has_no_limit(fake, tmp_path, home):  # noqa: F811
    run, store, c = submitted(fake, tmp_path, max_restarts=0, max_runtime="1h")
    fake.tasks[run.id.split("/")[-1]].update(script=["RUNNING"], step=0)
    for _ in range(3):
        c.tick()
    plan = store.plan_get(run.handle)
    assert plan["state"] == "FAILED" and plan["reason"] == "max_runtime 1h reached"
    assert "StopTrainingTask" in fake.actions()


def test_a_job_that_needs_nothing_is_no_plan(fake, tmp_path, home):  # noqa: F811
    p = provider(fake)
    rendered = p.render(make_job(tmp_path, max_restarts=0))
    run = p.submit(rendered)
    assert not controller.adopt(run.handle, [rendered], store=Store())
    assert Store().plan_get(run.handle) is None
    assert json.dumps(controller.describe()["following"]) == "[]"
