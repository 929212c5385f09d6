"""issue 30 item 3: list, status, logs, cancel, outputs and wait read the user config (and its
profiles) as submit does: a region given only in config.yaml reaches ``list -p sagemaker`` and
``list -p tione``, through the loopback doubles of SageMaker (moto) and TI-ONE."""
import json
from pathlib import Path

import pytest

from doubles.aws_double import AwsDouble  # noqa: E402
from conftest import run_cli  # noqa: E402
from doubles.tione_fixtures import fake  # noqa: E402,F401
from doubles.modelarts_double import AK, PROJECT, SK, FakeModelArts  # noqa: E402
from doubles.tione_double import SECRET_ID, SECRET_KEY  # noqa: E402

ROLE = "arn:aws:iam::123456789012:role/train"


@pytest.fixture(scope="module")
def aws():
    with AwsDouble() as double:
        yield double


def config(tmp_path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def aws_env(aws, cfg, **extra):
    env = aws.env(CLOUDTRAIN_CONFIG=str(cfg), **extra)
    env.pop("AWS_DEFAULT_REGION")
    env.pop("AWS_REGION")
    return env


def made_job(aws, name):
    aws.client("s3").create_bucket(Bucket="ct-bucket")
    aws.client("sagemaker").create_training_job(
        TrainingJobName=name, RoleArn=ROLE,
        AlgorithmSpecification={"TrainingImage": "img:1", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://ct-bucket/o"}, StoppingCondition={"MaxRuntimeInSeconds": 60},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30})


def test_list_and_status_of_sagemaker_read_the_region_from_the_user_config(aws, tmp_path, home):
    made_job(aws, "cfg-0123456789ab")
    cfg = config(tmp_path, "providers:\n  sagemaker: {region: us-east-1}\n")
    proc = run_cli("list", "-p", "sagemaker", "-o", "json", env=aws_env(aws, cfg))
    assert proc.returncode == 0, proc.stderr
    assert [j["handle"] for j in json.loads(proc.stdout)] == ["sagemaker://us-east-1/cfg-0123456789ab"]
    # without the config: no region anywhere, as before (exit 2, one line)
    bare = run_cli("list", "-p", "sagemaker", env=aws_env(aws, tmp_path / "none.yaml"))
    assert bare.returncode == 2 and "no AWS region" in bare.stderr


def test_a_profile_gives_the_region_to_list(aws, tmp_path, home):
    made_job(aws, "prof-0123456789ab")
    cfg = config(tmp_path, "profiles:\n  east: {providers: {sagemaker: {region: us-east-1}}}\n")
    proc = run_cli("list", "-p", "sagemaker", "--profile", "east", "-o", "json", env=aws_env(aws, cfg))
    assert proc.returncode == 0, proc.stderr
    assert "sagemaker://us-east-1/prof-0123456789ab" in [j["handle"] for j in json.loads(proc.stdout)]
    env = aws_env(aws, cfg, CLOUDTRAIN_PROFILE="east")
    assert run_cli("list", "-p", "sagemaker", env=env).returncode == 0


def test_list_of_tione_reads_the_region_from_the_user_config(fake, tmp_path, home):  # noqa: F811
    cfg = config(tmp_path, "providers:\n  tione: {region: ap-shanghai}\n")
    env = {"CLOUDTRAIN_TIONE_ENDPOINT": fake.url, "TENCENTCLOUD_SECRET_ID": SECRET_ID,
           "TENCENTCLOUD_SECRET_KEY": SECRET_KEY, "CLOUDTRAIN_CONFIG": str(cfg)}
    proc = run_cli("list", "-p", "tione", "-o", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    assert {c["headers"]["X-TC-Region"] for c in fake.calls} == {"ap-shanghai"}


def test_list_of_modelarts_reads_the_region_from_a_profile(tmp_path, home):
    with FakeModelArts() as ma:
        ma._create({"metadata": {"name": "ma-job", "description": "cloudtrain:spec-hash=0123456789abcdef"},
                    "algorithm": {}, "spec": {"resource": {"node_count": 1}}})
        cfg = config(tmp_path, "profiles:\n  cn: {providers: {modelarts: {region: cn-north-4}}}\n")
        env = {"HOME": str(tmp_path), "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK,
               "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT, "HUAWEICLOUD_SDK_REGION": "",
               "HUAWEICLOUD_SDK_REGION_MODELARTS_CN_NORTH_4": ma.url, "CLOUDTRAIN_CONFIG": str(cfg)}
        proc = run_cli("list", "-p", "modelarts", "--profile", "cn", "-o", "json", env=env)
        assert proc.returncode == 0, proc.stderr
        (job,) = json.loads(proc.stdout)
        assert job["handle"].startswith("modelarts://cn-north-4/") and job["provider"] == "modelarts"
        without = run_cli("list", "-p", "modelarts", "-o", "json", env=env)
        assert without.returncode == 2 and "no Huawei Cloud region" in without.stderr
