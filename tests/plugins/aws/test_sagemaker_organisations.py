"""Issue 40, "SageMaker for organisations": KMS keys, FastFile/Pipe input modes, sharded inputs,
MaxPendingTimeInSeconds and training plans, rendered into CreateTrainingJob and checked with
botocore's own validator and model; values outside the model's limits refused at their line."""
import botocore.session
import pytest
import yaml

from doubles.aws_double import validate_request
from cloudtrain.extend import plugins
from cloudtrain.input.loading import load_job
from cloudtrain.spec.errors import JobFileError
from conftest import run_cli, write_job
from test_aws_sagemaker_render import OPTIONS, as_sent, job, render

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-reserved-2026"


def shape(name):
    return botocore.session.get_session().get_service_model("sagemaker").shape_for(name)


def sent(**options):
    body = as_sent(render(job(options=options))["sagemaker/CreateTrainingJob"])
    validate_request("sagemaker", "CreateTrainingJob", body)  # botocore's validator, then the model's limits
    return body


def test_kms_keys_encrypt_the_outputs_and_the_volumes():
    """botocore: OutputDataConfig.KmsKeyId and ResourceConfig.VolumeKmsKeyId (shape KmsKeyId)."""
    assert shape("OutputDataConfig").members["KmsKeyId"].name == "KmsKeyId"
    body = sent(kms_key_id="alias/ml-outputs", volume_kms_key_id=KEY)
    assert body["OutputDataConfig"] == {"S3OutputPath": OPTIONS["output_s3"], "KmsKeyId": "alias/ml-outputs"}
    assert body["ResourceConfig"]["VolumeKmsKeyId"] == KEY
    plain = sent()
    assert "KmsKeyId" not in plain["OutputDataConfig"] and "VolumeKmsKeyId" not in plain["ResourceConfig"]


def test_input_mode_and_sharding_apply_to_the_data_inputs_not_to_the_code():
    """botocore: Channel.InputMode (TrainingInputMode: Pipe | File | FastFile), S3DataSource.
    S3DataDistributionType (FullyReplicated | ShardedByS3Key).  The code channel stays File: the boot
    line reads its archive as a file."""
    assert set(shape("TrainingInputMode").enum) == {"Pipe", "File", "FastFile"}
    assert shape("S3DataDistribution").enum == ["FullyReplicated", "ShardedByS3Key"]
    for mode in ("FastFile", "Pipe"):
        body = as_sent(render(job(storage={"inputs": {"train": "s3://data/train", "vocab": "s3://data/vocab"}},
                                  options={"input_mode": mode, "shard_inputs": ["train"]}))[
            "sagemaker/CreateTrainingJob"])
        validate_request("sagemaker", "CreateTrainingJob", body)
        channels = {c["ChannelName"]: c for c in body["InputDataConfig"]}
        assert channels["code"]["InputMode"] == "File"
        assert channels["code"]["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "FullyReplicated"
        assert channels["train"]["InputMode"] == channels["vocab"]["InputMode"] == mode
        assert channels["train"]["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "ShardedByS3Key"
        assert channels["vocab"]["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "FullyReplicated"
    default = sent(inputs={"train": "s3://data/train"})
    assert [c["InputMode"] for c in default["InputDataConfig"]] == ["File", "File"]


def test_max_pending_and_the_training_plan():
    """botocore: StoppingCondition.MaxPendingTimeInSeconds (1800 .. 2419200), ResourceConfig.TrainingPlanArn."""
    low, high = shape("MaxPendingTimeInSeconds").metadata["min"], shape("MaxPendingTimeInSeconds").metadata["max"]
    assert (low, high) == (1800, 2419200)
    body = sent(max_pending_seconds=low, training_plan_arn=PLAN, instance_type="ml.p5.48xlarge")
    assert body["StoppingCondition"]["MaxPendingTimeInSeconds"] == low
    assert body["ResourceConfig"]["TrainingPlanArn"] == PLAN
    assert sent(max_pending_seconds=high)["StoppingCondition"]["MaxPendingTimeInSeconds"] == high
    plain = sent()
    assert "MaxPendingTimeInSeconds" not in plain["StoppingCondition"]
    assert "TrainingPlanArn" not in plain["ResourceConfig"]


@pytest.mark.parametrize("option,value", [
    ("max_pending_seconds", 1799), ("max_pending_seconds", 2419201),  # MaxPendingTimeInSeconds: 1800 .. 2419200
    ("training_plan_arn", "arn:aws:sagemaker:us-east-1:123456789012:notebook/x"),  # pattern ...:training-plan/...
    ("kms_key_id", "alias/has space"), ("volume_kms_key_id", "k" * 2049),  # KmsKeyId: [a-zA-Z0-9:/_-]*, <= 2048
    ("input_mode", "Stream"), ("shard_inputs", ["absent"]),
])
def test_a_value_outside_the_model_is_refused_at_its_line(tmp_path, option, value):
    data = {"name": "org", "command": "python t.py", "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1",
            "storage": {"inputs": {"train": "s3://data/train"}},
            "providers": {"sagemaker": {**OPTIONS, option: value}}}
    path = write_job(tmp_path, yaml.safe_dump(data, sort_keys=False))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(option))
    with pytest.raises(JobFileError) as info:
        plugins.get_provider("sagemaker").render(load_job(path))
    assert str(info.value).startswith(f"{path}:{line}: providers.sagemaker.{option}"), str(info.value)
    assert "unknown field" not in str(info.value) and info.value.exit_code == 2  # an option, refused for its value
    proc = run_cli("validate", "-p", "sagemaker", path, check=2)  # validate says it offline, exit 2
    assert f"{path}:{line}: providers.sagemaker.{option}" in proc.stderr + proc.stdout
