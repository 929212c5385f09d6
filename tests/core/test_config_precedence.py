"""The job file overrides the settings files (docs/configuration.md), its neutral fields too: a
user config's providers.sagemaker.output_s3 is the account's default, which a job's
storage.output replaces; the job file's own output_s3 still conflicts with it."""
import textwrap

import pytest

from cloudtrain.api import render
from cloudtrain.spec.errors import JobFileError
from conftest import write_job

CONFIG = """
providers:
  sagemaker:
    role_arn: "arn:aws:iam::123456789012:role/train"
    output_s3: "s3://team-bucket/out"
    region: us-east-1
"""
JOB = """
name: portable
code: .
command: python train.py
image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1
storage: {output: "s3://team-bucket/this-job"}
"""


@pytest.fixture
def account(tmp_path, monkeypatch):
    config = tmp_path / "home" / "config.yaml"
    config.parent.mkdir()
    config.write_text(textwrap.dedent(CONFIG).lstrip())
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    return config


def output_path(rendered):
    request = next(a.content for a in rendered.artifacts if a.kind == "sagemaker/CreateTrainingJob")
    return request["OutputDataConfig"]["S3OutputPath"]


def test_storage_output_overrides_the_user_configs_output_s3(tmp_path, account):
    job = write_job(tmp_path / "job", JOB)
    assert output_path(render(job, provider="sagemaker")) == "s3://team-bucket/this-job"


def test_the_job_files_own_output_s3_still_conflicts(tmp_path, account):
    job = write_job(tmp_path / "job", JOB + "providers: {sagemaker: {output_s3: \"s3://elsewhere/out\"}}\n")
    with pytest.raises(JobFileError, match="keep one of them"):
        render(job, provider="sagemaker")
