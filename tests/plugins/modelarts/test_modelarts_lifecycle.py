"""modelarts (Standard): submit (the code uploaded to OBS first), status, logs, cancel, list and
outputs through the real ``huaweicloudsdkmodelarts`` and ``obs`` clients, signed with AK/SK, over
HTTP, against modelarts_double.py and obs_double.py."""
import json
import re
import threading
import time

import huaweicloudsdkmodelarts.v1 as v1
import pytest

from cloudtrain.providers.cloud import spec_hash
from cloudtrain.transfer import objectstore, shipping
from cloudtrain.spec.errors import EXIT_BAD_INPUT, EXIT_PLATFORM, BadInput, MissingCredentials, PlatformError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.providers.provider import State
from cloudtrain_modelarts import sdk
from conftest import EXAMPLES, run_cli, write_job
from doubles.modelarts_double import AK, PROJECT, SK, FakeModelArts
from doubles.obs_double import ObsDouble

SECRET = "hf_modelarts-secret-value-3377"
REGION_ENV = "HUAWEICLOUD_SDK_REGION_MODELARTS_CN_NORTH_4"
OBS_ENV = "HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4"
CODE_BUCKET = "bkt"


@pytest.fixture(scope="module")
def obs_server():
    with ObsDouble(AK, SK) as server:   # the same access key signs ModelArts' and OBS' requests
        yield server


@pytest.fixture
def obs(obs_server, monkeypatch):
    obs_server.reset()
    objectstore.forget_uploads()
    obs_server.create_bucket(CODE_BUCKET)
    monkeypatch.setenv(OBS_ENV, obs_server.endpoint)
    return obs_server


@pytest.fixture
def ma(monkeypatch, tmp_path, obs):
    with FakeModelArts() as fake:
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.huaweicloud profile from this machine
        monkeypatch.setenv("HUAWEICLOUD_SDK_AK", AK)
        monkeypatch.setenv("HUAWEICLOUD_SDK_SK", SK)
        monkeypatch.setenv("HUAWEICLOUD_SDK_PROJECT_ID", PROJECT)
        monkeypatch.setenv("HUAWEICLOUD_SDK_REGION", "cn-north-4")
        monkeypatch.setenv(REGION_ENV, fake.url)   # the SDK's own endpoint override
        yield fake


def job_file(tmp_path, command="python train.py --epochs 1", extra_options="", extra="",
             code=f"code_store: obs://{CODE_BUCKET}/team", source=EXAMPLES / "digits-ddp"):
    return write_job(tmp_path, f"""
        name: ma-job
        code: {source}
        command: {command}
        image: swr.cn-north-4.myhuaweicloud.com/team/pytorch:2.1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        env: {{OMP_NUM_THREADS: "1"}}
        {extra}
        providers:
          modelarts:
            region: cn-north-4
            {code}
            flavor_id: modelarts.vm.cpu.8u
            {extra_options}
        """)


def submit(tmp_path, **kw):
    job = load_job(job_file(tmp_path, **kw))
    provider = get_provider("modelarts")
    provider.status_poll = 0  # the tests move the job between two reads
    rendered = provider.render(job)
    return provider, rendered, provider.submit(rendered)


def created(ma):
    return [b for m, p, b in ma.requests if m == "POST" and p.endswith("/training-jobs")]


def test_submit_sends_the_rendered_body_signed_with_the_access_key(tmp_path, ma):
    provider, rendered, run = submit(tmp_path)
    assert re.fullmatch(r"modelarts://cn-north-4/[0-9a-f-]{36}", run.handle)
    (body,) = created(ma)
    expected = json.loads(json.dumps(rendered.artifacts[-1].content))
    _, sha = shipping.packed(rendered.job, (provider.detector_target(), *provider.node_modules))
    digest = spec_hash(rendered, sha)[:provider.spec_hash_length]  # of the render and the archive shipped
    expected["metadata"]["name"] = "ma-job-" + digest[:8]
    expected["metadata"]["description"] = "cloudtrain job ma-job cloudtrain:spec-hash=" + digest
    expected["algorithm"]["code_dir"] = f"/{CODE_BUCKET}/team/cloudtrain-code/{sha}/code/"
    expected["algorithm"]["command"] = expected["algorithm"]["command"].replace("<code-digest>", sha)
    assert f"--sha256 '{sha}' code.tar.gz . && " in body["algorithm"]["command"]  # checked before it is unpacked
    assert body == expected                    # exactly the dry run, plus the spec-hash name and the code's place
    assert sdk.from_model(sdk.to_model(v1, "Job", body)) == body
    job_id = run.id.split("/")[1]
    assert ma.jobs[job_id]["metadata"]["name"] == "ma-job-" + digest[:8]


def test_submitting_the_same_job_again_attaches(tmp_path, ma):
    _, _, first = submit(tmp_path)
    _, _, again = submit(tmp_path)
    assert again.handle == first.handle
    assert ma.count("POST", r"/training-jobs$") == 1 and ma.count("POST", "training-job-searches") == 2
    _, _, other = submit(tmp_path, command="python train.py --epochs 2")  # another request: another job
    assert other.handle != first.handle and ma.count("POST", r"/training-jobs$") == 2


def test_status_maps_phase_and_shows_the_secondary_phase(tmp_path, ma):
    _, _, run = submit(tmp_path)
    job_id = run.id.split("/")[1]
    assert (run.status().state, run.status().raw_state) == (State.PENDING, "Creating")
    ma.set_phase(job_id, "Pending", "Queuing")
    status = run.status()
    assert ((status.state, status.raw_state, status.message, status.nodes)
            == (State.PENDING, "Pending/Queuing", "Queuing", 2))
    ma.set_phase(job_id, "Running")
    status = run.status()
    assert (status.state, status.raw_state) == (State.RUNNING, "Running") and status.started_at
    ma.set_phase(job_id, "Completed", duration=61000)
    status = run.status()
    assert status.state is State.SUCCEEDED and status.ended_at == pytest.approx(status.started_at + 61)
    assert status.created_at and status.name.startswith("ma-job-")


def test_a_failed_task_gives_its_exit_code(tmp_path, ma):
    _, _, run = submit(tmp_path)
    job_id = run.id.split("/")[1]
    ma.set_phase(job_id, "Failed", "Failed", task_statuses=[
        {"task": "worker-0", "exit_code": 0, "message": ""},
        {"task": "worker-1", "exit_code": 3, "message": "rank 1: failing on purpose"}])
    status = run.status()
    assert (status.state, status.exit_code) == (State.FAILED, 3)
    assert status.message == "worker-1 exited with 3: rank 1: failing on purpose"
    ma.set_phase(job_id, "Abnormal")
    assert run.status().state is State.FAILED


def test_logs_of_every_task_and_of_one(tmp_path, ma):
    _, _, run = submit(tmp_path)
    job_id = run.id.split("/")[1]
    ma.log(job_id, "worker-0", "epoch 1/1 loss 0.3\ntest_accuracy 0.95\n")
    ma.log(job_id, "worker-1", "rank 1/2\npartial")
    lines = list(run.provider.logs(run.id))
    assert lines == ["[worker-0] epoch 1/1 loss 0.3\n", "[worker-0] test_accuracy 0.95\n",
                     "[worker-1] rank 1/2\n", "[worker-1] partial\n"]
    assert list(run.provider.logs(run.id + "/worker-1")) == ["rank 1/2\n", "partial\n"]
    assert ma.count("GET", "/tasks/worker-1/logs/preview") == 2


def test_follow_streams_until_the_job_ends(tmp_path, ma):
    provider, _, run = submit(tmp_path)
    provider.status_poll = 0.05
    job_id = run.id.split("/")[1]
    ma.set_phase(job_id, "Running")

    def platform():
        for i in range(5):
            ma.log(job_id, "worker-0", f"step {i} ")   # lines arrive in pieces
            ma.log(job_id, "worker-0", "done\n")
            time.sleep(0.05)
        ma.log(job_id, "worker-1", "last words")
        ma.set_phase(job_id, "Completed")

    thread = threading.Thread(target=platform)
    thread.start()
    lines = list(provider.logs(run.id, follow=True))
    thread.join()
    assert [line for line in lines if "worker-0" in line] == [f"[worker-0] step {i} done\n" for i in range(5)]
    assert lines[-1] == "[worker-1] last words\n"


def test_the_preview_window_is_said_when_the_log_outgrew_it(tmp_path, ma):
    ma.preview_limit = 16
    _, _, run = submit(tmp_path)
    job_id = run.id.split("/")[1]
    ma.log(job_id, "worker-0", "0123456789\n" * 4)
    lines = list(run.provider.logs(run.id + "/worker-0"))
    assert lines[0].startswith("[cloudtrain] ... 28 bytes skipped")
    assert lines[-1] == "0123456789\n"


def test_cancel_stops_once_and_is_idempotent(tmp_path, ma):
    _, _, run = submit(tmp_path)
    job_id = run.id.split("/")[1]
    ma.set_phase(job_id, "Running")
    status = run.cancel()
    assert (status.state, status.raw_state) == (State.CANCELLED, "Terminated")
    assert ma.count("POST", "/actions$") == 1 and ma.bodies[-1] == {"action_type": "terminate"}
    assert run.cancel().state is State.CANCELLED
    assert ma.count("POST", "/actions$") == 1
    ma.set_phase(job_id, "Completed")
    assert run.cancel().state is State.SUCCEEDED                 # an ended job stays as it ended


def test_cancel_racing_the_end_of_the_job(tmp_path, ma):
    provider, _, run = submit(tmp_path)
    job = ma.jobs[run.id.split("/")[1]]
    job["status"]["phase"] = "Running"
    real = provider.fresh_status

    def status_then_end(job_id):
        result = real(job_id)
        job["status"]["phase"] = "Completed"   # the job ends right after cancel looked at it
        return result
    provider.fresh_status = status_then_end
    assert provider.cancel(run.id).state is State.SUCCEEDED
    assert ma.count("POST", "/actions$") == 1   # the stop was refused (already ended): not an error


def test_a_running_jobs_status_is_asked_at_most_once_per_poll_interval(tmp_path, ma):
    provider, _, run = submit(tmp_path)
    provider.status_poll = 60
    job_id = run.id.split("/")[1]
    ma.set_phase(job_id, "Running")
    reads = ma.count("GET", job_id + "$")
    assert provider.fresh_status(run.id).state is State.RUNNING
    ma.set_phase(job_id, "Completed")
    assert [provider.status(run.id).state for _ in range(20)] == [State.RUNNING] * 20
    assert ma.count("GET", job_id + "$") == reads + 1
    provider.status_poll = 0
    assert provider.status(run.id).state is State.SUCCEEDED
    assert ma.count("GET", job_id + "$") == reads + 2


def test_list_shows_cloudtrains_jobs(tmp_path, ma):
    _, _, run = submit(tmp_path)
    ma._create({"metadata": {"name": "someone-elses", "description": "by hand"},
                "algorithm": {}, "spec": {"resource": {"node_count": 1}}})
    jobs = get_provider("modelarts").list()
    assert [j.handle for j in jobs] == [run.handle]
    assert jobs[0].state is State.PENDING and jobs[0].nodes == 2


def test_api_errors_carry_code_message_and_request_id(tmp_path, ma):
    provider = get_provider("modelarts")
    with pytest.raises(PlatformError) as info:
        provider.status("cn-north-4/no-such-job")
    text = str(info.value)
    assert "ModelArts.2742: Training job no-such-job not found (HTTP 404)" in text
    assert re.search(r"\(request id req-[0-9a-f]{16}\)$", text) and info.value.request_id.startswith("req-")
    ma.fail_next.append(("POST", r"/training-jobs$", 400, "ModelArts.2704", "flavor modelarts.vm.cpu.8u is sold out"))
    with pytest.raises(PlatformError,
                       match="refused create_training_job: ModelArts.2704: flavor modelarts.vm.cpu.8u is sold out"):
        submit(tmp_path)


def test_a_wrong_access_key_is_a_platform_error(tmp_path, ma, monkeypatch):
    monkeypatch.setenv("HUAWEICLOUD_SDK_AK", "AKSOMEONEELSE")
    with pytest.raises(PlatformError, match=r"APIGW.0301: .*unknown access key \(HTTP 401\); check HUAWEICLOUD_SDK_AK"):
        get_provider("modelarts").status("cn-north-4/x")


def test_unreachable_endpoint_is_a_platform_error(ma, monkeypatch):
    monkeypatch.setenv(REGION_ENV, "http://127.0.0.1:9")
    with pytest.raises(PlatformError, match="cannot reach ModelArts"):
        get_provider("modelarts").status("cn-north-4/x")


def test_nothing_is_sent_without_code_store_or_credentials(tmp_path, ma, monkeypatch, obs):
    job = load_job(job_file(tmp_path), {"providers.modelarts.code_store": None})
    with pytest.raises(BadInput, match=r"^--set providers.modelarts.code_store=null: providers.modelarts.code_store: "
                                       r"is not set; modelarts needs it to submit: "
                                       r"ModelArts runs code from OBS: submit "
                                       r"uploads the code"):
        get_provider("modelarts").submit(job)
    monkeypatch.delenv("HUAWEICLOUD_SDK_AK")
    with pytest.raises(MissingCredentials, match=r"no Huawei Cloud credentials found \(looked in: .*\); "
                                                 r"export HUAWEICLOUD_SDK_AK"):
        get_provider("modelarts").submit(load_job(job_file(tmp_path)))
    assert ma.calls == [] and obs.calls == []


# -- the code: uploaded to OBS before the request ------------------------------------------------------
def test_submit_uploads_the_archive_before_the_request_and_a_second_submit_uploads_nothing(tmp_path, ma, obs):
    provider, rendered, run = submit(tmp_path)
    data, sha = shipping.packed(rendered.job, (provider.detector_target(), *provider.node_modules))
    key = f"team/cloudtrain-code/{sha}/code/code.tar.gz"
    assert (obs.count("HEAD"), obs.count("PUT")) == (1, 1) and obs.refused == []
    # the archive alone in the job's code_dir
    assert obs.object(CODE_BUCKET, key) == data.read_bytes()
    assert created(ma)[0]["algorithm"]["code_dir"] == f"/{CODE_BUCKET}/{key.rsplit('/', 1)[0]}/"
    obs.calls.clear()
    objectstore.forget_uploads()                                       # as a new process would
    _, _, again = submit(tmp_path)
    assert again.handle == run.handle
    assert [m for m, _, _ in obs.calls] == ["HEAD"]                    # found there: nothing uploaded


def test_changed_code_is_a_new_object(tmp_path, ma, obs):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('one')\n")
    submit(tmp_path, source=code)
    (code / "train.py").write_text("print('two')\n")
    submit(tmp_path, source=code)
    assert obs.count("PUT") == 2
    assert len({b["algorithm"]["code_dir"] for b in created(ma)}) == 2


def test_a_failed_upload_sends_no_request(tmp_path, ma, obs):
    with pytest.raises(PlatformError, match=r"OBS refused to upload obs://nobucket/team/cloudtrain-code/[0-9a-f]{64}/code/"
                                            r"code.tar.gz: NoSuchBucket"):
        submit(tmp_path, code="code_store: obs://nobucket/team")
    assert not [c for c in ma.calls if c[0] == "POST"]


def test_ship_code_alone_uploads_once_and_names_the_object(tmp_path, ma, obs):
    provider = get_provider("modelarts")
    rendered = provider.render(load_job(job_file(tmp_path)), submit=True)
    (first,) = provider.ship_code(rendered)
    assert re.fullmatch(rf"obs://{CODE_BUCKET}/team/cloudtrain-code/[0-9a-f]{{64}}/code/code.tar.gz", first)
    assert provider.ship_code(rendered) == [first] and obs.count("PUT") == 1
    staged = provider.render(load_job(job_file(tmp_path, code="code_dir: obs://bkt/jobs/digits-ddp/")))
    with pytest.raises(BadInput, match="code_dir names code staged by hand"):
        provider.ship_code(staged)


def test_code_staged_by_hand_is_not_uploaded(tmp_path, ma, obs):
    _, rendered, _ = submit(tmp_path, code="code_dir: obs://bkt/jobs/digits-ddp/")
    assert [a.kind for a in rendered.artifacts] == ["modelarts/CreateTrainingJob"]
    assert created(ma)[0]["algorithm"]["code_dir"] == "/bkt/jobs/digits-ddp/" and obs.calls == []


# -- outputs ------------------------------------------------------------------------------------------
def test_outputs_downloads_the_jobs_obs_output(tmp_path, ma, obs):
    provider, _, run = submit(tmp_path, extra="storage: {output: obs://bkt/runs/digits/}")
    assert created(ma)[0]["algorithm"]["outputs"][0]["remote"] == {"obs": {"obs_url": "/bkt/runs/digits/"}}
    client = obs.client()   # what ModelArts uploads from CLOUDTRAIN_OUTPUT_DIR when the job ends
    client.putContent("bkt", "runs/digits/model.pt", b"weights")
    client.putContent("bkt", "runs/digits/logs/metrics.json", b"{}")
    client.putContent("bkt", "runs/other/x", b"another job's")
    files = provider.outputs(run.id, tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in files) == ["logs/metrics.json", "model.pt"]
    assert (tmp_path / "out" / "model.pt").read_bytes() == b"weights"
    _, _, plain = submit(tmp_path, command="python train.py --epochs 3")
    with pytest.raises(BadInput, match="has no storage.output"):
        provider.outputs(plain.id, tmp_path / "none")


def test_secrets_are_refused_unless_allowed_then_sent_only_to_the_platform(tmp_path, ma, monkeypatch):
    monkeypatch.setenv("CT_MA_SECRET", SECRET)
    extra = "secrets: {HF_TOKEN: {from_env: CT_MA_SECRET}}"
    with pytest.raises(BadInput, match="no secret store: HF_TOKEN"):
        submit(tmp_path, extra=extra)
    assert ma.calls == []
    provider, rendered, run = submit(tmp_path, extra=extra, extra_options="secrets_in_environment: true")
    assert SECRET not in rendered.to_json()
    assert created(ma)[0]["algorithm"]["environments"]["HF_TOKEN"] == SECRET
    ma.fail_next.append(("POST", r"/training-jobs$", 400, "ModelArts.2701", f"bad value {SECRET}"))
    with pytest.raises(PlatformError) as info:
        submit(tmp_path, extra=extra, extra_options="secrets_in_environment: true", command="python train.py")
    assert SECRET not in str(info.value) and "bad value ***" in str(info.value)
    assert info.value.request_id.startswith("req-")
    assert str(info.value).endswith(f"(request id {info.value.request_id})")


def test_cli_lifecycle(tmp_path, ma, obs, home):
    env = {k: v for k, v in __import__("os").environ.items() if k.startswith("HUAWEICLOUD_") or k == "HOME"}
    path = job_file(tmp_path)
    proc = run_cli("submit", "-p", "modelarts", path, "--detach", "--set", "storage.output=obs://bkt/runs/cli/",
                   env=env, check=0)
    handle = proc.stdout.strip()
    job_id = handle.rsplit("/", 1)[1]
    ma.set_phase(job_id, "Running")
    ma.log(job_id, "worker-0", "hello from worker 0\n")
    status = json.loads(run_cli("status", handle, "-o", "json", env=env, check=0).stdout)
    assert (status["state"], status["raw_state"]) == ("RUNNING", "Running")
    assert "[worker-0] hello from worker 0" in run_cli("logs", handle, env=env, check=0).stdout
    assert "CANCELLED" in run_cli("cancel", handle, env=env, check=0).stdout
    obs.client().putContent("bkt", "runs/cli/result.txt", b"done")
    out = tmp_path / "cli-out"
    run_cli("outputs", handle, "-o", str(out), env=env, check=0)
    assert (out / "result.txt").read_bytes() == b"done"
    missing = run_cli("status", "modelarts://cn-north-4/nope", env=env, check=EXIT_PLATFORM)
    assert "ModelArts.2742" in missing.stderr and "request id req-" in missing.stderr
    bad = run_cli("status", "modelarts://nope", env=env, check=EXIT_BAD_INPUT)
    assert "expected <region>/<training job id>" in bad.stderr
