"""A failover's SageMaker job is in the ledger before it is watched (issue 39, item 3): with
``-p sagemaker,tione`` the job SageMaker accepted is watched until it starts (a ``CapacityError``
before start moves on); a DescribeTrainingJob refused in that watch, a SIGINT, a SIGHUP, leave
the job in a ledger row, and an interrupt there cancels it as it does while a job is followed.
Real CLI processes against the AWS double (moto) and the TI-ONE double."""
import json
import signal
import subprocess
import sys
import time

import pytest

from conftest import cli_env, run_cli, write_job
from doubles.tione_fixtures import fake  # noqa: F401
from doubles.tione_double import SECRET_ID, SECRET_KEY

ROLE = "arn:aws:iam::123456789012:role/train"
BUCKET = "ct-bucket"


@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, BUCKET)


def job_file(tmp_path):
    (tmp_path / "job").mkdir(exist_ok=True)
    (tmp_path / "job" / "train.py").write_text("print('hi')\n")
    return write_job(tmp_path / "job", f"""
        name: fo
        command: python train.py
        image: img:1
        distribution: {{type: ddp, nodes: 1, procs_per_node: 1}}
        providers:
          tione: {{instance_type: TI.S.LARGE.POST, code_source: "cfs://cfs-1/code"}}
          sagemaker: {{role_arn: "{ROLE}", output_s3: "s3://{BUCKET}/runs"}}
        """)


def env_for(aws, fake):  # noqa: F811
    return aws.env(CLOUDTRAIN_TIONE_ENDPOINT=fake.url, TENCENTCLOUD_SECRET_ID=SECRET_ID,
                   TENCENTCLOUD_SECRET_KEY=SECRET_KEY, TENCENTCLOUD_REGION="ap-shanghai")


def rows(env):
    return {j["handle"]: j for j in json.loads(run_cli("list", "-o", "json", env=env, check=0).stdout)}


def sagemaker_jobs(aws):
    return dict(aws.backend("sagemaker").training_jobs)


def test_a_refused_describe_in_the_watch_leaves_the_job_in_the_ledger_and_says_so(aws, fake, tmp_path, home):  # noqa: F811
    aws.fail("DescribeTrainingJob", "forbidden")
    env = env_for(aws, fake)
    proc = run_cli("submit", "-p", "sagemaker,tione", job_file(tmp_path), "--detach", env=env)
    assert proc.returncode == 3, proc.stderr
    [name] = sagemaker_jobs(aws)
    handle = f"sagemaker://us-east-1/{name}"
    assert "AccessDenied" in proc.stderr and f"cloudtrain cancel {handle}" in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith("cloudtrain: error:")]) == 1
    assert "CreateTrainingTask" not in fake.actions()  # nothing else was started
    assert handle in rows(env)


def submit_in_background(aws, fake, tmp_path, *extra):  # noqa: F811
    env = env_for(aws, fake)
    proc = subprocess.Popen([sys.executable, "-m", "cloudtrain", "submit", "-p", "sagemaker,tione",
                             str(job_file(tmp_path)), *extra], env=cli_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if aws.count("DescribeTrainingJob") >= 2:  # it is in the watch (the row was written before)
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    return proc, env


def test_sigint_in_the_watch_cancels_the_recorded_job_as_a_followed_one(aws, fake, tmp_path, home):  # noqa: F811
    proc, env = submit_in_background(aws, fake, tmp_path)
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    [(name, job)] = sagemaker_jobs(aws).items()
    handle = f"sagemaker://us-east-1/{name}"
    assert f"interrupted: cancelling {handle}" in err
    assert job.training_job_status in ("Stopping", "Stopped")
    assert handle in rows(env)
    assert "CreateTrainingTask" not in fake.actions()


def test_sighup_in_the_watch_leaves_the_job_in_the_ledger(aws, fake, tmp_path, home):  # noqa: F811
    proc, env = submit_in_background(aws, fake, tmp_path, "--detach")
    try:
        proc.send_signal(signal.SIGHUP)  # a closed terminal: the CLI ends at once, as Ctrl-C ends it
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130  # SIGHUP is handled as SIGINT is (docs/cli.md, submit)
    [name] = sagemaker_jobs(aws)
    handle = f"sagemaker://us-east-1/{name}"
    assert handle in rows(env)  # the job is known: cloudtrain list, status, cancel reach it
    assert "CANCELLED" in run_cli("cancel", handle, env=env, check=0).stdout
