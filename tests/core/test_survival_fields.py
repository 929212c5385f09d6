"""The neutral fields of issue 19 (``spot``, ``max_runtime``, ``storage.checkpoint``), their
errors, and what local and docker make of them; the supervisor's time limit and restart reasons
with in-memory nodes (the real runs are tests/e2e/test_surviving_failures.py)."""
import json
import signal
import time

import pytest

from cloudtrain.spec.durations import format_duration, parse_duration
from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain.commands.progress import describe, describe_restarts
from cloudtrain.providers.provider import JobStatus, State
from cloudtrain.runtime.store import Store
from cloudtrain.providers.survival import provider_setting
from conftest import run_cli, write_job

from test_supervise import FakeNode, FakeSupervisor

JOB = """
name: survive
code: .
command: python train.py
distribution: {type: ddp, nodes: 2}
"""


@pytest.mark.parametrize("text,seconds,shown", [
    ("8h", 28800, "8h"), ("1h30m", 5400, "1h30m"), ("90s", 90, "1m30s"), ("2d", 172800, "2d"),
    ("3600", 3600, "1h"), (45, 45, "45s"), ("1d2h3m4s", 93784, "1d2h3m4s"), (" 30M ", 1800, "30m"),
])
def test_durations_read_with_units_and_print_back(text, seconds, shown):
    assert parse_duration(text) == seconds and format_duration(seconds) == shown


@pytest.mark.parametrize("value,message", [
    ("8x", "'8x' is not a duration; write a number with a unit: 90s, 30m, 8h, 2d"),
    ("30m1h", "give each unit once, largest first (e.g. 1h30m)"),
    ("1h1h", "give each unit once"),
    ("0s", "must be longer than 0 seconds"),
    ("-5", "-5 must be longer than 0 seconds"),
    ("true", "True is not a duration"),
    ("1.5h", "is not a duration"),
])
def test_a_bad_duration_is_refused_at_its_line(tmp_path, value, message):
    with pytest.raises(JobFileError) as info:
        load_job(write_job(tmp_path, JOB + f"max_runtime: {value}\n"))
    assert str(info.value).startswith(f"{tmp_path / 'job.yaml'}:5: max_runtime: "), str(info.value)
    assert message in str(info.value)


def test_the_neutral_fields_load_and_default_off(tmp_path):
    job = load_job(write_job(tmp_path, JOB + "spot: true\nmax_runtime: 1h30m\nstorage: {checkpoint: s3://team/ckpt/}\n"))
    assert job.spot is True and job.max_runtime == 5400 and job.max_runtime_text == "1h30m"
    assert job.storage.checkpoint == "s3://team/ckpt/"
    plain = load_job(write_job(tmp_path / "plain", JOB))
    assert (plain.spot, plain.max_runtime, plain.storage.checkpoint) == (False, None, None)
    with pytest.raises(JobFileError, match=r"job.yaml:5: storage.chekpoint: unknown field.*checkpoint"):
        load_job(write_job(tmp_path / "typo", JOB + "storage: {chekpoint: s3://x/}\n"))


# -- local and docker: a host directory ---------------------------------------------------
def test_local_nodes_see_the_checkpoint_directory_relative_to_the_job_file(tmp_path):
    job = load_job(write_job(tmp_path, JOB + "storage: {checkpoint: ./ckpt}\n"))
    for artifact in get_provider("local").render(job).artifacts:
        assert artifact.content["env"]["CLOUDTRAIN_CHECKPOINT_DIR"] == str(tmp_path / "ckpt")
    uri = load_job(write_job(tmp_path / "uri", JOB + f"storage: {{checkpoint: 'file://{tmp_path}/c2'}}\n"))
    rendered_env = get_provider("local").render(uri).artifacts[0].content["env"]
    assert rendered_env["CLOUDTRAIN_CHECKPOINT_DIR"] == str(tmp_path / "c2")
    none = load_job(write_job(tmp_path / "none", JOB))
    assert "CLOUDTRAIN_CHECKPOINT_DIR" not in get_provider("local").render(none).artifacts[0].content["env"]


@pytest.mark.parametrize("platform", ["sagemaker", "azure", "tione", "modelarts", "kubeflow", "ec2"])
def test_an_emulated_platform_takes_the_local_checkpoint_directory(tmp_path, platform):
    """Emulating a platform gives the nodes its environment; the checkpoint stays this machine's
    directory (the platform's own URI rules apply to its render, not to its emulation)."""
    job = load_job(write_job(tmp_path, JOB + "storage: {checkpoint: ./ckpt}\nmax_runtime: 90m\n"
                                             f"providers: {{local: {{emulate: {platform}}}}}\n"))
    for artifact in get_provider("local").render(job).artifacts:
        assert artifact.content["env"]["CLOUDTRAIN_CHECKPOINT_DIR"] == str(tmp_path / "ckpt")


def test_docker_mounts_the_checkpoint_directory_read_write(tmp_path):
    job = load_job(write_job(tmp_path, JOB + "image: img:1\nstorage: {checkpoint: ./ckpt}\n"))
    for artifact in get_provider("docker").render(job).artifacts:
        if artifact.kind == "docker/container":
            assert f"{tmp_path / 'ckpt'}:/checkpoints" in artifact.content["HostConfig"]["Binds"]
            assert "CLOUDTRAIN_CHECKPOINT_DIR=/checkpoints" in artifact.content["Env"]


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_a_cloud_uri_cannot_be_a_local_checkpoint(tmp_path, provider):
    job = load_job(write_job(tmp_path, JOB + "image: img:1\nstorage: {checkpoint: s3://team/ckpt}\n"))
    with pytest.raises(JobFileError) as info:
        get_provider(provider).render(job)
    assert str(info.value).startswith(f"{tmp_path / 'job.yaml'}:6: storage.checkpoint: {provider} keeps checkpoints "
                                      "in a directory on this machine, got 's3://team/ckpt'; "
                                      "give a path or a file:// URI")


def test_spot_on_this_machine_is_a_warning_not_an_error(tmp_path):
    job = load_job(write_job(tmp_path, JOB + "spot: true\n"))
    with pytest.warns(CloudtrainWarning, match="spot: local runs the job on this machine, which has no spot capacity"):
        get_provider("local").render(job)


def test_the_cli_refuses_a_bad_duration_with_exit_2(tmp_path, home):
    proc = run_cli("submit", write_job(tmp_path, JOB), "--set", "max_runtime=8 hours")
    assert proc.returncode == 2
    assert "--set max_runtime=8 hours: max_runtime: '8 hours' is not a duration" in proc.stderr
    assert not list(home.glob("runs/*")) and not (home / "state.db").exists()  # nothing started


# -- a neutral field and a provider's own option for the same thing -------------------------
def test_a_provider_option_that_disagrees_with_the_neutral_field_is_an_error(tmp_path):
    from cloudtrain_aws.sagemaker import SageMakerOptions
    job = load_job(write_job(tmp_path, JOB + "max_runtime: 2h\nproviders:\n  sagemaker: {max_runtime_seconds: 3600}\n"))
    options = SageMakerOptions(max_runtime_seconds=3600)
    with pytest.raises(JobFileError) as info:
        provider_setting(job, "sagemaker", options, "max_runtime_seconds", ("max_runtime",), job.max_runtime, "2h")
    assert str(info.value).startswith(f"{tmp_path / 'job.yaml'}:7: providers.sagemaker.max_runtime_seconds: "
                                      "3600 disagrees with max_runtime: 2h; keep one of them")
    assert provider_setting(job, "sagemaker", SageMakerOptions(max_runtime_seconds=7200), "max_runtime_seconds",
                            ("max_runtime",), 7200) == 7200
    assert provider_setting(job, "sagemaker", SageMakerOptions(), "max_runtime_seconds", ("max_runtime",),
                            None) == 86400


# -- the supervisor ------------------------------------------------------------------------------
@pytest.fixture
def supervise(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIN_HOME", str(tmp_path / "home"))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def make(attempts, **plan):
        """``attempts``: the nodes of each attempt, in order."""
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        first = attempts[0]
        plan = {"job_id": "j-1", "nodes": [{"node": n.index} for n in first], "nproc_per_node": 1,
                "distribution": "none", "max_restarts": len(attempts) - 1, **plan}
        (run_dir / "plan.json").write_text(json.dumps(plan))
        Store().add_job(id="j-1", provider="local", name="j", nodes=len(first), run_dir=str(run_dir), state="PENDING")

        class Attempts(FakeSupervisor):
            def start_node(self, spec, attempt):
                return attempts[attempt][spec["node"]]
        return Attempts(run_dir, first)

    yield make
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


@pytest.mark.serial  # its wall time is bounded (every node stopped within 10 s of the limit)
def test_max_runtime_stops_every_node_and_fails_the_job_without_a_restart(supervise):
    nodes = [FakeNode(0, exits=False), FakeNode(1, exits=False)]
    sup = supervise([nodes, [FakeNode(0), FakeNode(1)]], max_runtime=1, max_runtime_text="1s")
    started = time.monotonic()
    assert sup.run() == 1
    assert time.monotonic() - started < 10  # the nodes would run for ever: the deadline ended them
    row = Store().get_job("j-1")
    assert row["state"] == "FAILED" and row["message"] == "max_runtime 1s reached" and row["exit_code"] == 1
    assert all(n.stopped for n in nodes)
    assert Store().get_restarts("j-1") == []  # the second attempt never started
    assert "[cloudtrain] job failed: max_runtime 1s reached" in (sup.run_dir / "job.log").read_text()


def test_each_restart_is_kept_with_its_reason(supervise):
    attempts = [[FakeNode(0), FakeNode(1, code=-9)], [FakeNode(0, code=3), FakeNode(1, exits=False)],
                [FakeNode(0), FakeNode(1)]]
    sup = supervise(attempts)
    assert sup.run() == 0
    restarts = Store().get_restarts("j-1")
    assert [r["attempt"] for r in restarts] == [1, 2]
    assert restarts[0]["reason"].startswith("node 1 was killed by signal 9")
    assert restarts[1]["reason"].startswith("node 0 exited with code 3")
    status = get_provider("local", store=Store())._status(Store().get_job("j-1"))
    assert status.state is State.SUCCEEDED and [r["attempt"] for r in status.restarts] == [1, 2]
    assert json.loads(json.dumps(status.to_dict()))["restarts"][1]["reason"].startswith("node 0 exited with code 3")


def test_status_text_shows_the_restarts_and_why():
    status = JobStatus(handle="local://j-1", state=State.RUNNING, nodes=2, nodes_up=2,
                       restarts=[{"attempt": 1, "reason": "node 1 was killed by signal 9", "at": 1700000000.0}])
    assert "restarts 1" in describe(status, now=10.0)
    at = time.strftime("%H:%M:%S", time.localtime(1700000000.0))
    assert describe_restarts(status)[0].endswith("restart 1 at " + at + ": node 1 was killed by signal 9")
    assert "restarts" not in describe(JobStatus(handle="local://j-2", state=State.RUNNING))
