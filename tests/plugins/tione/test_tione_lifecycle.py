"""submit / status / logs / cancel / list through the real SDK TioneClient, over HTTP, against a
fake TI-ONE endpoint on 127.0.0.1 (tione_double.py) that verifies each request's TC3 signature
and loads each body into the SDK's request model."""
import json
import re

import pytest
from tencentcloud.common.credential import Credential

from cloudtrain.spec.errors import BadInput, EXIT_PLATFORM, PlatformError
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.provider import State
from conftest import run_cli, write_job
from doubles.tione_fixtures import fake  # noqa: F401
from doubles.tione_double import SECRET_ID, SECRET_KEY

from cloudtrain_tione.provider import TioneProvider

OPTIONS = {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
           "code_source": "cos://train-1250000000/code/lc/"}



def provider(fake, key=SECRET_KEY, **kw):
    kw.setdefault("poll", 0)  # every status() reads afresh (the fake advances a task per read)
    return TioneProvider(credential=Credential(SECRET_ID, key), endpoint=fake.url, **kw)


def make_job(tmp_path, **overrides):
    code = tmp_path / "code"
    if not code.exists():
        code.mkdir()
        (code / "train.py").write_text("print('hi')\n")
    data = {"name": "lc", "code": str(code), "command": "python train.py", "image": "img:1",
            "distribution": {"type": "ddp", "nodes": 2}, "secrets": {"HF_TOKEN": {"from_env": "CT_TIONE_TOKEN"}},
            "providers": {"tione": dict(OPTIONS)}}
    data.update(overrides)
    return job_from_dict(data)


def test_submit_creates_the_task_and_a_second_submit_attaches(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CT_TIONE_TOKEN", "tok-very-secret-4711")
    job = make_job(tmp_path)
    run = provider(fake).submit(provider(fake).render(job))
    region, task = run.id.split("/")
    assert region == "ap-shanghai" and task.startswith("train-") and run.handle == f"tione://{run.id}"
    assert fake.actions() == ["DescribeTrainingTasks", "CreateTrainingTask"]
    body = fake.bodies("CreateTrainingTask")[0]
    spec = {t["TagKey"]: t["TagValue"] for t in body["Tags"]}["cloudtrain-spec"]
    assert re.fullmatch(r"[0-9a-f]{16}", spec) and body["Name"] == f"lc-{spec}"
    assert "<spec-hash>" not in json.dumps(body)
    # the secret travels only as a private variable of the request
    assert {"Name": "HF_TOKEN", "Value": "tok-very-secret-4711", "IsPrivate": True} in body["Envs"]
    lookup = fake.bodies("DescribeTrainingTasks")[0]
    assert lookup["Filters"] == [{"Name": "Name", "Values": [body["Name"]]}]
    assert lookup["TagFilters"] == [{"TagKey": "cloudtrain-spec", "TagValues": [spec]}]
    # every request was signed (TC3-HMAC-SHA256) and carried the action and region
    assert all(c["headers"]["X-TC-Region"] == "ap-shanghai" for c in fake.calls)
    assert fake.calls[1]["headers"]["X-TC-Action"] == "CreateTrainingTask"

    # the same job again: attach to the task, create nothing
    again = provider(fake).submit(provider(fake).render(make_job(tmp_path)))
    assert again.id == run.id
    assert fake.actions().count("CreateTrainingTask") == 1
    # other code is another spec: a new task
    (tmp_path / "code" / "train.py").write_text("print('changed')\n")
    other = provider(fake).submit(provider(fake).render(make_job(tmp_path)))
    assert other.id != run.id and fake.actions().count("CreateTrainingTask") == 2


def test_project_goes_into_the_id_and_every_call(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CT_TIONE_TOKEN", "x")
    job = make_job(tmp_path, providers={"tione": dict(OPTIONS, project="proj-7")})
    p = provider(fake)
    run = p.submit(p.render(job))
    assert run.id.startswith("ap-shanghai/proj-7/train-")
    p.status(run.id)
    assert fake.bodies("DescribeTrainingTask")[0]["TiProjectId"] == "proj-7"
    assert fake.bodies("CreateTrainingTask")[0]["TiProjectId"] == "proj-7"


def test_submit_without_what_it_needs_sends_nothing(fake, tmp_path, monkeypatch):
    monkeypatch.delenv("TENCENTCLOUD_REGION", raising=False)
    job = make_job(tmp_path, providers={"tione": {}}, secrets={})
    with pytest.raises(BadInput) as info:
        provider(fake).submit(provider(fake).render(job))
    lines = str(info.value).splitlines()  # every one at once
    # no instance_type: a job without accelerators gets the smallest CPU spec (issue 30 item 4)
    for need, line in zip(("providers.tione.code_store: is not set", "providers.tione.region: is not set"),
                          lines, strict=True):
        assert line.startswith(need), lines
    assert "cloudtrain config set -p tione code_store=cos://my-bucket-1250000000/cloudtrain" in lines[0]
    assert "or providers.tione.code_source for code already on COS" in lines[0]
    assert fake.calls == []


def test_status_follows_the_task_through_its_states(fake):
    task = fake.add_task("st-1", nodes=3)
    p = provider(fake)
    seen = [p.status(f"ap-shanghai/{task}") for _ in range(6)]
    assert [s.raw_state for s in seen] == ["SUBMITTING", "PENDING", "STARTING", "RUNNING", "SUCCEED", "SUCCEED"]
    assert [s.state for s in seen] == [State.PENDING, State.PENDING, State.STARTING, State.RUNNING,
                                       State.SUCCEEDED, State.SUCCEEDED]
    last = seen[-1]
    assert last.nodes == 3 and last.name == "st-1" and last.handle == f"tione://ap-shanghai/{task}"
    assert last.created_at < last.started_at < last.ended_at
    final = p.wait(f"ap-shanghai/{task}", poll=0.01)
    assert final.state is State.SUCCEEDED


@pytest.mark.parametrize("raw,state", sorted(TioneProvider.states.items()))
def test_every_tione_status_maps(fake, raw, state):
    task = fake.add_task("m", script=[raw], failure="OOMKilled: worker-0 exited with 137")
    status = provider(fake).status(f"ap-shanghai/{task}")
    assert status.state is state and status.raw_state == raw
    if raw in ("FAILED", "SUBMIT_FAILED"):
        assert status.message == "OOMKilled: worker-0 exited with 137"


def test_the_status_table_covers_the_sdk_list():
    # DescribeTrainingTasks' Status filter lists every status a task can have
    from tencentcloud.tione.v20211111 import models
    doc = models.DescribeTrainingTasksRequest.__init__.__doc__
    listed = set(re.search(r"SUBMITTING/PENDING/STARTING[^\n]*", doc).group(0).replace(" ", "").split("/"))
    assert listed == set(TioneProvider.states)


def test_unknown_and_arrears_statuses(fake):
    task = fake.add_task("u", script=["SOMETHING_NEW"])
    status = provider(fake).status(f"ap-shanghai/{task}")
    assert status.state is State.UNKNOWN and status.raw_state == "SOMETHING_NEW"
    task = fake.add_task("a", script=["STOPPED"], charge_status="ARREARS_STOP")
    status = provider(fake).status(f"ap-shanghai/{task}")
    assert status.state is State.CANCELLED and "arrears" in status.message


def test_logs_are_paged_with_the_context_cursor(fake):
    task = fake.add_task("lg", script=["RUNNING", "SUCCEED"])
    for i in range(5):
        fake.add_log(task, i % 2, f"line {i}", seconds=i)
    p = provider(fake)
    p.page_limit = 2
    lines = list(p.logs(f"ap-shanghai/{task}"))
    assert lines == ["[launcher] line 0\n", "[worker-0] line 1\n", "[launcher] line 2\n", "[worker-0] line 3\n",
                     "[launcher] line 4\n"]
    calls = fake.bodies("DescribeLogs")
    assert {c["ServiceId"] for c in calls} == {f"{task}-1"}  # the task's LatestInstanceId
    assert all(c["Service"] == "TRAIN" and c["Limit"] == 2 and c["StartTime"] == "2025-11-20T08:00:30Z" for c in calls)
    launcher = [c for c in calls if c["PodName"].endswith("launcher")]
    assert [bool(c.get("Context")) for c in launcher] == [False, True]  # 3 lines: 2 pages


def test_logs_follow_until_the_task_ends(fake):
    task = fake.add_task("fl", script=["PENDING", "STARTING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "SUCCEED"])
    fake.add_log(task, 0, "booting", when="STARTING")
    fake.add_log(task, 1, "epoch 1", when="RUNNING", seconds=10)
    fake.add_log(task, 0, "epoch 2", when="SUCCEED", seconds=20)
    fake.add_log(task, 0, "NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA",
                 when="SUCCEED", seconds=21)
    lines = list(provider(fake).logs(f"ap-shanghai/{task}", follow=True))
    assert lines == ["[launcher] booting\n", "[worker-0] epoch 1\n", "[launcher] epoch 2\n",
                     "[launcher] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA\n"]
    # each line once, though the follower asked again from the last timestamp it had seen
    assert len(fake.bodies("DescribeLogs")) > 4


def test_logs_of_a_task_without_pods_yet(fake):
    task = fake.add_task("q", script=["PENDING"])
    assert list(provider(fake).logs(f"ap-shanghai/{task}")) == []
    assert "DescribeLogs" not in fake.actions()


def test_submitting_process_masks_the_secrets_in_logs(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CT_TIONE_TOKEN", "tok-leaky-value-99")
    p = provider(fake)
    run = p.submit(p.render(make_job(tmp_path)))
    task = run.id.split("/")[1]
    fake.tasks[task]["script"] = ["RUNNING", "SUCCEED"]
    fake.add_log(task, 0, "token is tok-leaky-value-99")
    assert list(p.logs(run.id)) == ["[launcher] token is ***\n"]


def test_a_resubmit_that_finds_its_task_masks_the_secrets_in_its_logs(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CT_TIONE_TOKEN", "tok-leaky-value-99")
    first = provider(fake).submit(provider(fake).render(make_job(tmp_path)))
    p = provider(fake)  # another process: it finds the task the first submit created
    run = p.submit(p.render(make_job(tmp_path)))
    assert run.id == first.id and fake.actions().count("CreateTrainingTask") == 1
    task = run.id.split("/")[1]
    fake.tasks[task]["script"] = ["RUNNING", "SUCCEED"]
    fake.add_log(task, 0, "token is tok-leaky-value-99")
    assert list(p.logs(run.id)) == ["[launcher] token is ***\n"]


def test_cancel_is_idempotent(fake):
    task = fake.add_task("c", script=["RUNNING"])
    p, job_id = provider(fake), f"ap-shanghai/{task}"
    assert p.status(job_id).state is State.RUNNING
    first = p.cancel(job_id)
    assert first.raw_state == "STOPPING" and first.state is State.RUNNING
    assert fake.actions().count("StopTrainingTask") == 1
    second = p.cancel(job_id)  # STOPPED now: nothing more to stop
    assert second.state is State.CANCELLED
    assert p.cancel(job_id).state is State.CANCELLED
    assert fake.actions().count("StopTrainingTask") == 1
    done = fake.add_task("d", script=["SUCCEED"])
    assert p.cancel(f"ap-shanghai/{done}").state is State.SUCCEEDED
    assert fake.actions().count("StopTrainingTask") == 1


def test_list_pages_through_cloudtrain_tasks(fake):
    for i in range(53):
        fake.add_task(f"t{i}", tags={"managed-by": "cloudtrain"}, script=["RUNNING"])
    fake.add_task("not-ours", script=["RUNNING"])
    jobs = provider(fake, region="ap-shanghai").list()
    assert len(jobs) == 53 and {j.state for j in jobs} == {State.RUNNING}
    assert all(j.handle.startswith("tione://ap-shanghai/train-") for j in jobs)
    offsets = [b["Offset"] for b in fake.bodies("DescribeTrainingTasks")]
    assert offsets == [0, 50]


def test_list_needs_a_region(monkeypatch):
    monkeypatch.delenv("TENCENTCLOUD_REGION", raising=False)
    with pytest.raises(BadInput, match="TENCENTCLOUD_REGION"):
        TioneProvider().list()


def test_api_errors_carry_code_message_and_request_id(fake):
    fake.fail("DescribeTrainingTask", "ResourceNotFound", "training task train-9 does not exist")
    with pytest.raises(PlatformError) as info:
        provider(fake).status("ap-shanghai/train-9")
    exc = info.value
    assert exc.exit_code == EXIT_PLATFORM
    assert re.fullmatch(r"[0-9a-f-]{36}", exc.request_id)
    assert str(exc) == (f"TI-ONE refused describing tione://ap-shanghai/train-9: ResourceNotFound: training task "
                        f"train-9 does not exist; check the handle and its region (cloudtrain list -p tione shows "
                        f"the tasks) (request id {exc.request_id})")


def test_a_bad_signature_is_an_auth_failure(fake):
    task = fake.add_task("s")
    with pytest.raises(PlatformError) as info:
        provider(fake, key="not-the-key").status(f"ap-shanghai/{task}")
    assert "AuthFailure.SignatureFailure" in str(info.value) and "TENCENTCLOUD_SECRET_ID" in str(info.value)


def test_quota_errors_at_create(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CT_TIONE_TOKEN", "x")
    fake.fail("CreateTrainingTask", "ResourceInsufficient.QuotaInsufficient", "quota exceeded for TI.S.LARGE.POST")
    p = provider(fake)
    with pytest.raises(PlatformError, match="ResourceInsufficient.QuotaInsufficient: quota exceeded.*more quota"):
        p.submit(p.render(make_job(tmp_path)))


def test_status_is_read_at_most_once_per_poll_interval(fake):
    task = fake.add_task("cache", script=["RUNNING", "SUCCEED"])
    p = provider(fake, poll=60)
    assert [p.status(f"ap-shanghai/{task}").raw_state for _ in range(3)] == ["RUNNING"] * 3
    assert fake.actions().count("DescribeTrainingTask") == 1
    assert p.cancel(f"ap-shanghai/{task}").state is State.SUCCEEDED  # cancel looks afresh
    assert "StopTrainingTask" not in fake.actions()


def test_bad_handles():
    with pytest.raises(BadInput, match="tione://REGION/TASK_ID"):
        TioneProvider().status("train-123")


# -- the command line, in subprocesses, against the same fake ------------------------------------
def cli_env(fake):
    return {"CLOUDTRAIN_TIONE_ENDPOINT": fake.url, "TENCENTCLOUD_SECRET_ID": SECRET_ID,
            "TENCENTCLOUD_SECRET_KEY": SECRET_KEY, "TENCENTCLOUD_REGION": "ap-shanghai", "CT_TIONE_TOKEN": "t0k-cli"}


def test_cli_lifecycle(fake, tmp_path, home):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text("print('hi')\n")
    path = write_job(tmp_path / "job", """
        name: cli
        command: python train.py
        image: img:1
        distribution: {type: ddp, nodes: 2}
        secrets: {HF_TOKEN: {from_env: CT_TIONE_TOKEN}}
        providers:
          tione: {instance_type: TI.S.LARGE.POST, code_source: "cfs://cfs-1/code"}
        """)
    env = cli_env(fake)
    handle = run_cli("submit", "-p", "tione", path, "--detach", env=env, check=0).stdout.strip()
    assert re.fullmatch(r"tione://ap-shanghai/train-\d+", handle)
    task = handle.rsplit("/", 1)[1]
    fake.tasks[task]["script"] = ["RUNNING", "RUNNING", "SUCCEED"]
    fake.add_log(task, 0, "NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA")
    fake.add_log(task, 1, "NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext/0/GDRDMA", seconds=1)
    status = json.loads(run_cli("status", handle, "-o", "json", env=env, check=0).stdout)
    assert status["state"] == "RUNNING" and status["raw_state"] == "RUNNING" and status["nodes"] == 2
    logs = run_cli("logs", handle, env=env, check=0).stdout.splitlines()
    assert logs == ["[launcher] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA",
                    "[worker-0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext/0/GDRDMA"]
    check = run_cli("logs", "--check-rdma", handle, env=env, check=0).stdout
    assert check.startswith("RDMA: yes, GPUDirect RDMA on all 2 inter-node NCCL channels (2 via IBext)")
    listed = run_cli("list", "-p", "tione", "-o", "json", env=env, check=0).stdout
    assert [j["handle"] for j in json.loads(listed)] == [handle]
    cancelled = run_cli("cancel", handle, env=env, check=0)
    assert "SUCCEEDED" in cancelled.stdout  # it ended meanwhile: nothing to stop
    assert "StopTrainingTask" not in fake.actions()
    # the same job again attaches to the same task
    assert run_cli("submit", "-p", "tione", path, "--detach", env=env, check=0).stdout.strip() == handle


def test_cli_submit_follows_to_the_end(fake, tmp_path, home):
    path = write_job(tmp_path / "job", """
        name: follow
        command: python train.py
        image: img:1
        providers:
          tione: {instance_type: TI.S.LARGE.POST, code_source: image}
        """)
    proc = run_cli("submit", "-p", "tione", path, env=cli_env(fake), check=0)
    assert "submitted tione://ap-shanghai/train-" in proc.stderr and "SUCCEEDED" in proc.stderr


def test_cli_errors_exit_3_with_the_request_id(fake, home):
    fake.fail("DescribeTrainingTask", "InternalError", "the service is down")
    proc = run_cli("status", "tione://ap-shanghai/train-1", env=cli_env(fake), check=3)
    assert re.search(r"cloudtrain: error: TI-ONE refused describing tione://ap-shanghai/train-1: InternalError: "
                     r"the service is down; see TI-ONE's error codes \(request id [0-9a-f-]{36}\)", proc.stderr)
