"""sagemaker: the neutral spot, max_runtime and storage.checkpoint (issue 19) in CreateTrainingJob,
checked with botocore's service model; limits pinned to SageMaker's API reference as botocore
ships it (the StoppingCondition documentation in the sagemaker service model)."""
import pytest

from doubles.aws_double import validate_request
from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from conftest import run_cli, write_job
from test_aws_sagemaker_render import as_sent, job, render


def sagemaker_docs(shape: str, member: str) -> str:
    import botocore.session
    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.shape_for(shape).members[member].documentation


def test_the_three_neutral_fields_render_as_managed_spot_with_a_checkpoint_and_a_stopping_condition():
    request = render(job(spot=True, max_runtime="8h", storage={"checkpoint": "s3://team/ckpt/digits/"},
                         max_restarts=2))["sagemaker/CreateTrainingJob"]
    validate_request("sagemaker", "CreateTrainingJob", as_sent(request))
    assert request["EnableManagedSpotTraining"] is True
    # spot: MaxWaitTimeInSeconds (run time plus waiting for capacity) must be >= MaxRuntimeInSeconds
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 28800, "MaxWaitTimeInSeconds": 57600}
    assert request["CheckpointConfig"] == {"S3Uri": "s3://team/ckpt/digits/", "LocalPath": "/opt/ml/checkpoints"}
    assert request["Environment"]["CLOUDTRAIN_CHECKPOINT_DIR"] == "/opt/ml/checkpoints"
    # SageMaker resumes a spot job by itself; max_restarts is its RetryStrategy, nothing on top
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    on_demand = render(job(max_runtime="90m", storage={"checkpoint": "s3://team/ckpt/"}))["sagemaker/CreateTrainingJob"]
    validate_request("sagemaker", "CreateTrainingJob", as_sent(on_demand))
    assert on_demand["StoppingCondition"] == {"MaxRuntimeInSeconds": 5400}
    assert "EnableManagedSpotTraining" not in on_demand and on_demand["CheckpointConfig"]["S3Uri"] == "s3://team/ckpt/"


def test_the_neutral_fields_and_the_old_options_agree_or_the_job_is_refused(tmp_path):
    same = render(job(max_runtime="2h", spot=True, options={"max_runtime_seconds": 7200, "spot": True}))
    assert same["sagemaker/CreateTrainingJob"]["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    path = write_job(tmp_path, """
        name: sm
        command: python t.py
        image: img
        storage: {checkpoint: s3://a/ckpt}
        providers:
          sagemaker: {checkpoint_s3: s3://b/other}
    """)
    from cloudtrain.extend import plugins
    with pytest.raises(JobFileError) as info:
        plugins.get_provider("sagemaker").render(load_job(path))
    assert str(info.value).startswith(f"{path}:6: providers.sagemaker.checkpoint_s3: s3://b/other disagrees with "
                                      "storage.checkpoint: s3://a/ckpt; keep one of them")


def test_max_runtime_beyond_28_days_is_refused_as_sagemaker_says(tmp_path):
    # botocore's service model, StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days."
    assert "The maximum value is 28 days." in sagemaker_docs("StoppingCondition", "MaxRuntimeInSeconds")
    from cloudtrain.extend import plugins
    plugins.get_provider("sagemaker").render(job(max_runtime="28d"))
    path = write_job(tmp_path, "name: sm\ncommand: python t.py\nimage: img\nmax_runtime: 29d\n")
    with pytest.raises(JobFileError) as info:
        plugins.get_provider("sagemaker").render(load_job(path))
    assert str(info.value).startswith(f"{path}:4: max_runtime: 29d is longer than the 28d SageMaker allows")


def test_a_checkpoint_outside_s3_is_refused_at_its_line(tmp_path):
    # botocore's service model: CheckpointConfig.S3Uri, "the S3 path where you want SageMaker to store checkpoints"
    assert "S3 path" in sagemaker_docs("CheckpointConfig", "S3Uri")
    path = write_job(tmp_path, "name: sm\ncommand: python t.py\nimage: img\nstorage: {checkpoint: 'gs://b/ckpt'}\n")
    from cloudtrain.extend import plugins
    with pytest.raises(JobFileError) as info:
        plugins.get_provider("sagemaker").render(load_job(path))
    assert str(info.value).startswith(f"{path}:4: storage.checkpoint: SageMaker keeps checkpoints under s3://, "
                                      "got 'gs://b/ckpt'; e.g. s3://team/ckpt/digits/")


def test_status_counts_sagemakers_own_restarts_from_the_secondary_status_transitions():
    # botocore's model, DescribeTrainingJobResponse.SecondaryStatus: "Interrupted - The job stopped
    # because the managed spot training instances were interrupted."
    import datetime
    assert "managed spot training instances were interrupted" in sagemaker_docs("DescribeTrainingJobResponse",
                                                                                 "SecondaryStatus")
    from cloudtrain.extend import plugins
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    transitions = [{"Status": s, "StartTime": at, "StatusMessage": m} for s, m in (
        ("Starting", "Preparing the instances"), ("Training", "Training image download completed"),
        ("Interrupted", "Spot capacity was reclaimed"), ("Restarting", "Restarting after interruption"),
        ("Training", ""), ("Restarting", "Retrying after an internal error"), ("Training", ""))]
    status = plugins.get_provider("sagemaker")._to_status("us-east-1/sm-job-0123456789ab", {
        "TrainingJobName": "sm-job-0123456789ab", "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training",
        "SecondaryStatusTransitions": transitions})
    assert [(r["attempt"], r["reason"]) for r in status.restarts] == [
        (1, "Interrupted: Spot capacity was reclaimed"), (2, "Restarting: Retrying after an internal error")]
    assert status.restarts[0]["at"] == at.timestamp()


def test_max_restarts_says_at_validate_that_sagemaker_retries_only_its_own_internal_errors(tmp_path):
    """botocore's model, RetryStrategy: "The retry strategy to use when a training job fails due
    to an InternalServerError": a crash of the job's code is never retried, which job-file.md's
    whole-job restart "after a failure" would otherwise promise.  validate says so at the line."""
    path = write_job(tmp_path, "name: r\ncommand: python t.py\nimage: img\nmax_restarts: 2\n"
                     "providers:\n  sagemaker:\n    role_arn: arn:aws:iam::123456789012:role/train\n"
                     "    output_s3: s3://ct-bucket/o\n    region: us-east-1\n")
    proc = run_cli("validate", "-p", "sagemaker", path)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if ": max_restarts: " in line]  # (the tmp path has the word too)
    assert len(said) == 1 and f"{path}:4: max_restarts: " in said[0], proc.stderr
    assert "InternalServerError" in said[0] and "not restarted" in said[0]
    from cloudtrain.spec.errors import CloudtrainWarning
    with pytest.warns(CloudtrainWarning, match="InternalServerError"):
        request = render(load_job(path))["sagemaker/CreateTrainingJob"]
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    path.write_text(path.read_text().replace("max_restarts: 2\n", ""))
    assert ": max_restarts: " not in run_cli("validate", "-p", "sagemaker", path).stderr
