"""sagemaker against moto in server mode (real HTTP through boto3), with the test double's
extensions: submit -> status -> logs -> cancel -> list, idempotent submit after a lost response,
throttling and 5xx, EFA from EC2's data, and the CLI end to end."""
import collections
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import threading
import time

import pytest

import cloudtrain
from doubles.aws_double import validate_request
from cloudtrain.extend import plugins
from cloudtrain.spec.errors import JobFileError, JobNotFound, PlatformError
from cloudtrain.providers.provider import State
from conftest import EXAMPLES, run_cli

ROLE = "arn:aws:iam::123456789012:role/train"
BUCKET = "ct-bucket"
SETS = {"providers.sagemaker.role_arn": ROLE, "providers.sagemaker.output_s3": f"s3://{BUCKET}/runs"}


@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, BUCKET)


def digits(**sets):
    return cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml", overrides={**SETS, **sets})


def provider(aws):
    return plugins.get_provider("sagemaker", **aws.clients())


def only_job(aws):
    jobs = aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert len(jobs) == 1, jobs
    return jobs[0]["TrainingJobName"]


def sent(aws, action="CreateTrainingJob"):
    return [p for s, a, p in aws.requests if a == action]


def test_submit_uploads_the_code_and_creates_exactly_one_job(aws):
    job = digits()
    rendered = plugins.get_provider("sagemaker").render(job)
    run = provider(aws).submit(rendered)
    name = only_job(aws)
    assert run.handle == f"sagemaker://us-east-1/{name}"
    assert name.startswith("digits-ddp-") and len(name) == len("digits-ddp-") + 12
    # one create, nothing redundant: no describe while submitting, the code uploaded once
    assert aws.count("CreateTrainingJob") == 1 and aws.count("DescribeTrainingJob") == 0
    assert aws.count("S3.PUT") == 1
    request = sent(aws)[0]
    validate_request("sagemaker", "CreateTrainingJob", request)
    spec_hash = next(t["Value"] for t in request["Tags"] if t["Key"] == "cloudtrain:spec-hash")
    assert name.endswith(spec_hash[:12]) and len(spec_hash) == 64
    # what was sent is what was rendered, placeholders filled in
    rendered_request = next(a.content for a in rendered.artifacts if a.kind == "sagemaker/CreateTrainingJob")
    uri = request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
    digest = uri.split("/")[-2]
    assert json.loads(json.dumps(rendered_request).replace("<code-digest>", digest).replace(
        "digits-ddp-<spec-hash>", name).replace("<spec-hash>", spec_hash)) == request
    # the code archive: content-addressed, with the launcher bundle and the SageMaker detector
    data = aws.client("s3").get_object(Bucket=BUCKET, Key=f"runs/cloudtrain-code/{digest}/code.tar.gz")["Body"].read()
    assert hashlib.sha256(data).hexdigest() == digest
    names = tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))).getnames()
    for member in ("train.py", "job.yaml", ".cloudtrain/cloudtrain/launch/main.py",
                   ".cloudtrain/cloudtrain_aws/detect.py", ".cloudtrain/cloudtrain_aws/node.py"):
        assert member in names, names
    # SageMaker has the job as sent (the double echoes Environment, which moto drops)
    described = aws.client("sagemaker").describe_training_job(TrainingJobName=name)
    assert described["Environment"]["CLOUDTRAIN_DETECTORS"] == "sagemaker=cloudtrain_aws.detect:detect_sagemaker"
    assert described["ResourceConfig"]["InstanceCount"] == 2


def test_status_follows_the_job_with_its_secondary_status(aws):
    p = provider(aws)
    run = p.submit(digits())
    name = only_job(aws)
    first = run.status()
    assert first.state is State.STARTING and first.raw_state == "InProgress/Starting"
    assert first.message.startswith("Starting") and first.nodes == 2
    aws.set_training(name, "InProgress", "Downloading", "Downloading the training image")
    assert run.status().state is State.STARTING
    aws.set_training(name, "InProgress", "Training", "Training image download completed. Training in progress.")
    status = run.status()
    assert (status.state, status.raw_state) == (State.RUNNING, "InProgress/Training")
    assert "Training in progress" in status.message and status.started_at
    aws.set_training(name, "Completed", "Completed", "Training job completed")
    final = run.wait(timeout=10)
    assert final.state is State.SUCCEEDED and final.exit_code == 0 and final.ended_at


@pytest.mark.parametrize("status,secondary,failure,state", [
    ("Failed", "Failed", "AlgorithmError: ExecuteUserScriptError: exit code 3", State.FAILED),
    ("Stopped", "MaxRuntimeExceeded", None, State.FAILED),
])
def test_failures_are_failed_with_the_reason(aws, status, secondary, failure, state):
    run = provider(aws).submit(digits())
    aws.set_training(only_job(aws), status, secondary, "the end", failure=failure)
    final = run.wait(timeout=10)
    assert final.state is state and final.exit_code == 1
    assert (failure or secondary) in final.message


def test_logs_read_one_stream_per_host_and_follow_until_the_end(aws):
    run = provider(aws).submit(digits())
    name = only_job(aws)
    assert list(run.logs(follow=False)) == []  # no log group yet: no lines, no error
    aws.set_training(name, "InProgress", "Training")
    aws.emit_logs(name, "algo-1", ["rank 0/4 local_rank 0 on node 0", "epoch 1/10 loss 1.2"])
    aws.emit_logs(name, "algo-2", ["rank 2/4 local_rank 0 on node 1"])
    lines = "".join(run.logs()).splitlines()  # oldest first; each host's lines in their order
    assert [x for x in lines if x.startswith("[algo-1] ")] == ["[algo-1] rank 0/4 local_rank 0 on node 0",
                                                             "[algo-1] epoch 1/10 loss 1.2"]
    assert [x for x in lines if x.startswith("[algo-2] ")] == ["[algo-2] rank 2/4 local_rank 0 on node 1"]
    assert len(lines) == 3
    # cloudtrain logs --node 1: the second host's stream; no rank and no time in a CloudWatch line
    from cloudtrain.runtime.logselect import LogSelection
    from cloudtrain.spec.errors import BadInput
    second = ["[algo-2] rank 2/4 local_rank 0 on node 1\n"]
    assert list(run.provider.select_logs(run.id, LogSelection(node=1))) == second
    assert list(run.provider.select_logs(run.id, LogSelection(node=0, tail=1))) == ["[algo-1] epoch 1/10 loss 1.2\n"]
    for asked in (LogSelection(rank=2), LogSelection(since=0.0)):
        with pytest.raises(BadInput, match="one per host"):
            run.provider.select_logs(run.id, asked)
    seen = []
    follower = threading.Thread(target=lambda: seen.extend(run.logs(follow=True)))
    follower.start()
    time.sleep(0.2)
    aws.emit_logs(name, "algo-1", ["test_accuracy 0.9611"])
    aws.set_training(name, "Completed", "Completed")
    follower.join(timeout=20)
    assert not follower.is_alive()
    assert seen[-1] == "[algo-1] test_accuracy 0.9611\n" and len(seen) == 4


def test_cancel_stops_the_job_once(aws):
    p = provider(aws)
    run = p.submit(digits())
    name = only_job(aws)
    aws.set_training(name, "InProgress", "Training")
    status = run.cancel()
    assert status.state in (State.RUNNING, State.CANCELLED)
    assert run.wait(timeout=10).state is State.CANCELLED
    assert aws.client("sagemaker").describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "Stopped"
    assert run.cancel().state is State.CANCELLED  # idempotent
    assert aws.count("StopTrainingJob") == 1
    done = p.submit(digits(**{"env.RUN": "2"}))
    aws.set_training(done.id.split("/")[1], "Completed", "Completed")
    assert done.cancel().state is State.SUCCEEDED  # an ended job stays as it ended
    assert aws.count("StopTrainingJob") == 1


def test_a_create_whose_response_was_lost_is_retried_and_attached(aws):
    aws.fail("CreateTrainingJob", "drop")  # SageMaker creates the job; the client never hears back
    run = provider(aws).submit(digits())
    assert aws.dropped == 1 and aws.count("CreateTrainingJob") == 2  # botocore retried
    assert run.id.endswith(only_job(aws))  # one job, and the submit attached to it
    again = provider(aws).submit(digits())  # a second submit of the same spec: the same job
    assert again.handle == run.handle and only_job(aws)


def test_a_submit_reads_each_code_file_once_and_a_resubmit_still_finds_the_job(aws, monkeypatch, tmp_path):
    """The spec hash is of the archive ``ship`` sent (a reproducible archive), so the code is read
    once, to pack it, and not a second time to hash it (a 1 GB tree: a whole read and sha256 less);
    the same code and job file still give the same spec, and a second submit finds the job."""
    from cloudtrain.transfer import shipping
    shutil.copytree(EXAMPLES / "digits-ddp", tmp_path / "digits-ddp")  # code no earlier test packed
    job_file = tmp_path / "digits-ddp" / "job.yaml"
    opened = collections.Counter()
    real = shipping._open_regular

    def counting(path):
        opened[os.path.realpath(path)] += 1
        return real(path)
    monkeypatch.setattr(shipping, "_open_regular", counting)
    run = provider(aws).submit(cloudtrain.load_job(job_file, overrides=SETS))
    code = [p for p in opened if p.startswith(str(job_file.parent.resolve()) + os.sep)]
    assert code and all(opened[p] == 1 for p in code), opened
    opened.clear()
    again = provider(aws).submit(cloudtrain.load_job(job_file, overrides=SETS))
    assert again.handle == run.handle and only_job(aws)  # one job: the same spec, the same name
    assert all(opened[p] <= 1 for p in code), opened  # (this process packed it already: none)


def test_throttling_and_server_errors_are_retried(aws):
    aws.fail("CreateTrainingJob", "throttle")
    aws.fail("DescribeTrainingJob", "5xx")
    run = provider(aws).submit(digits())
    assert run.status().state is State.STARTING
    assert aws.count("CreateTrainingJob") == 2 and aws.count("DescribeTrainingJob") == 2
    only_job(aws)


def test_efa_presets_come_from_the_catalog_or_ec2s_instance_type_data(aws):
    p = provider(aws)
    p.submit(digits(**{"providers.sagemaker.instance_type": "ml.p4d.24xlarge"}))
    p.submit(digits(**{"providers.sagemaker.instance_type": "ml.p4d.24xlarge", "env.RUN": "2"}))
    p.submit(digits(**{"providers.sagemaker.instance_type": "ml.m5.xlarge"}))
    envs = [r["Environment"] for r in sent(aws)]
    assert envs[0]["FI_PROVIDER"] == "efa" and envs[1]["FI_PROVIDER"] == "efa"
    assert "FI_PROVIDER" not in envs[2]
    assert envs[0]["FI_EFA_USE_DEVICE_RDMA"] == "1"  # the catalog's p4d row: EFA with RDMA read
    # p4d is in the shipped catalog: no call; m5.xlarge (no GPU) is not: EC2 is asked, once per process
    assert aws.count("DescribeInstanceTypes") == 1
    with pytest.raises(JobFileError, match=r"m5.xlarge has no EFA") as info:
        p.submit(digits(**{"network.rdma": "on", "env.RUN": "3"}))
    assert info.value.exit_code == 2 and len(sent(aws)) == 3
    p.submit(digits(**{"network.rdma": "off", "providers.sagemaker.instance_type": "ml.p4d.24xlarge", "env.RUN": "4"}))
    assert "FI_PROVIDER" not in sent(aws)[-1]["Environment"]


def test_nothing_is_sent_without_a_role_or_for_an_unmapped_secret(aws, monkeypatch):
    job = cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml")
    with pytest.raises(JobFileError, match="role_arn: is not set"):
        provider(aws).submit(job)
    monkeypatch.setenv("CT_HF", "hf-secret-value")
    with pytest.raises(JobFileError, match="Secrets Manager") as info:
        provider(aws).submit(digits(**{"secrets.HF_TOKEN.from_env": "CT_HF"}))
    assert "hf-secret-value" not in str(info.value)
    assert sum(aws.calls.values()) == 0
    run = provider(aws).submit(digits(**{"secrets.HF_TOKEN.from_env": "CT_HF",
                                         "providers.sagemaker.secrets_manager.HF_TOKEN": "cloudtrain/hf"}))
    assert run.status().state is State.STARTING
    assert "hf-secret-value" not in json.dumps(aws.requests)
    assert json.loads(sent(aws)[0]["Environment"]["CLOUDTRAIN_SECRET_IDS"]) == {"HF_TOKEN": "cloudtrain/hf"}


def test_aws_errors_are_platform_errors_with_the_fix_and_request_id(aws):
    with pytest.raises(PlatformError) as info:
        provider(aws).submit(digits(**{"providers.sagemaker.output_s3": "s3://no-such-bucket/x"}))
    assert info.value.exit_code == 3 and "NoSuchBucket" in str(info.value)
    assert "create the bucket" in str(info.value)
    with pytest.raises(JobNotFound):
        provider(aws).status("us-east-1/nope-0123456789ab")


def test_list_shows_the_jobs_cloudtrain_named(aws):
    p = provider(aws)
    a = p.submit(digits())
    b = p.submit(digits(**{"env.RUN": "2"}))
    request = dict(sent(aws)[0], TrainingJobName="made-by-hand")
    aws.client("sagemaker").create_training_job(**request)
    handles = {s.handle for s in p.list()}
    assert handles == {a.handle, b.handle}
    assert all(s.state is State.STARTING for s in p.list())


# -- the CLI, end to end -----------------------------------------------------------------------------
def drive(aws, lines, end=("Completed", "Completed", None)):
    """Play SageMaker: wait for the job, run it, write its logs, end it."""
    deadline = time.monotonic() + 60
    while not aws.backend("sagemaker").training_jobs and time.monotonic() < deadline:
        time.sleep(0.02)
    name = next(iter(aws.backend("sagemaker").training_jobs))
    time.sleep(0.3)
    aws.set_training(name, "InProgress", "Training")
    aws.emit_logs(name, "algo-1", lines[:1])
    aws.emit_logs(name, "algo-2", lines[1:])
    time.sleep(0.3)
    aws.set_training(name, end[0], end[1], failure=end[2])


def test_cli_submit_follows_to_the_end_and_the_other_commands_work(aws, tmp_path):
    aws.fail("CreateTrainingJob", "drop")  # and the first create's response is lost on the way
    job = EXAMPLES / "digits-ddp" / "job.yaml"
    sets = [f"--set={k}={v}" for k, v in SETS.items()]
    player = threading.Thread(target=drive, args=(aws, ["epoch 1/10 loss 0.5", "test_accuracy 0.9722"]))
    player.start()
    proc = run_cli("submit", "-p", "sagemaker", job, *sets, env=aws.env(), timeout=120)
    player.join()
    assert proc.returncode == 0, proc.stderr
    assert "[algo-1] epoch 1/10 loss 0.5" in proc.stdout and "[algo-2] test_accuracy 0.9722" in proc.stdout
    handle = next(line.split()[1] for line in proc.stderr.splitlines() if line.startswith("submitted "))
    assert handle == f"sagemaker://us-east-1/{only_job(aws)}" and "SUCCEEDED" in proc.stderr
    status = json.loads(run_cli("status", handle, "-o", "json", env=aws.env(), check=0).stdout)
    assert status["state"] == "SUCCEEDED" and status["raw_state"] == "Completed/Completed"
    assert "[algo-2] test_accuracy 0.9722" in run_cli("logs", handle, env=aws.env(), check=0).stdout
    assert handle in run_cli("list", "-p", "sagemaker", env=aws.env(), check=0).stdout
    assert "SUCCEEDED" in run_cli("cancel", handle, env=aws.env(), check=0).stdout
    assert run_cli("status", "sagemaker://us-east-1/nope-0123456789ab", env=aws.env()).returncode == 2


def test_cli_stage_uploads_the_code_once_and_submit_then_finds_it(aws):
    job = EXAMPLES / "digits-ddp" / "job.yaml"
    sets = [f"--set={k}={v}" for k, v in SETS.items()]
    proc = run_cli("stage", "-p", "sagemaker", job, *sets, env=aws.env(), check=0)
    (url,) = proc.stdout.splitlines()
    assert url.startswith(f"s3://{BUCKET}/runs/cloudtrain-code/") and url.endswith("/code.tar.gz")
    data = aws.client("s3").get_object(Bucket=BUCKET, Key=url[len(f"s3://{BUCKET}/"):])["Body"].read()
    assert hashlib.sha256(data).hexdigest() == url.split("/")[-2]  # content-addressed
    assert aws.count("S3.PUT") == 1 and aws.count("CreateTrainingJob") == 0  # no job was sent
    # a second stage (another process: nothing remembered) finds the object and uploads nothing
    assert run_cli("stage", "-p", "sagemaker", job, *sets, env=aws.env(), check=0).stdout == proc.stdout
    assert aws.count("S3.PUT") == 1
    # the Python API says the same, and a submit of the same code sends no second copy
    assert cloudtrain.stage(digits(), provider(aws)) == [url]
    provider(aws).submit(digits())
    assert aws.count("S3.PUT") == 1 and aws.count("CreateTrainingJob") == 1
    request = sent(aws)[0]
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == url


def test_cli_stage_checks_offline_first_and_sends_nothing_on_bad_input(aws):
    job = EXAMPLES / "digits-ddp" / "job.yaml"
    proc = run_cli("stage", "-p", "sagemaker", job, f"--set=providers.sagemaker.role_arn={ROLE}", env=aws.env())
    assert proc.returncode == 2 and "providers.sagemaker.output_s3: is not set" in proc.stderr, proc.stderr
    assert sum(aws.calls.values()) == 0


def test_cli_exit_code_follows_a_failed_job(aws):
    player = threading.Thread(target=drive, args=(aws, ["x", "y"], ("Failed", "Failed", "AlgorithmError: exit 3")))
    player.start()
    proc = run_cli("submit", "-p", "sagemaker", EXAMPLES / "digits-ddp" / "job.yaml",
                   *[f"--set={k}={v}" for k, v in SETS.items()], env=aws.env(), timeout=120)
    player.join()
    assert proc.returncode == 1, proc.stderr
    assert "AlgorithmError: exit 3" in proc.stderr


def test_cli_without_a_role_exits_2_and_sends_nothing(aws):
    proc = run_cli("submit", "-p", "sagemaker", EXAMPLES / "digits-ddp" / "job.yaml", env=aws.env())
    assert proc.returncode == 2 and "providers.sagemaker.role_arn: is not set" in proc.stderr
    assert aws.count("CreateTrainingJob") == 0


def test_submit_without_credentials_or_with_a_wrong_profile(aws, monkeypatch):
    sets = [f"--set={k}={v}" for k, v in SETS.items()]
    job = EXAMPLES / "digits-ddp" / "job.yaml"
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    env = {k: v for k, v in aws.env().items() if not k.startswith(("AWS_ACCESS", "AWS_SECRET", "AWS_SESSION"))}
    proc = run_cli("submit", "-p", "sagemaker", job, *sets, env=dict(env, AWS_EC2_METADATA_DISABLED="true"))
    assert proc.returncode == 3 and "no AWS credentials found" in proc.stderr, proc.stderr
    proc = run_cli("submit", "-p", "sagemaker", job, *sets, env=dict(aws.env(), AWS_PROFILE="nope"))
    assert proc.returncode == 2 and "nope" in proc.stderr and "AWS_PROFILE" in proc.stderr, proc.stderr
    assert aws.count("CreateTrainingJob") == 0


def test_outputs_download_and_unpack_the_jobs_model_tar_gz(aws, tmp_path):
    """SageMaker uploads /opt/ml/model (CLOUDTRAIN_OUTPUT_DIR) as <S3OutputPath>/<job>/output/model.tar.gz
    and names it in DescribeTrainingJob's ModelArtifacts.S3ModelArtifacts (botocore's model:
    ModelArtifacts, "the S3 path where model artifacts ... are stored")."""
    run = provider(aws).submit(digits())
    name = only_job(aws)
    aws.set_training(name, "Completed", "Completed")
    uri = aws.client("sagemaker").describe_training_job(TrainingJobName=name)["ModelArtifacts"]["S3ModelArtifacts"]
    assert uri == f"s3://{BUCKET}/runs/{name}/output/model.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("metrics.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    aws.client("s3").put_object(Bucket=BUCKET, Key=f"runs/{name}/output/model.tar.gz", Body=raw.getvalue())
    files = provider(aws).outputs(run.id, tmp_path / "out")
    assert files == [tmp_path / "out" / "metrics.json"] and files[0].read_text() == "{}"


def test_an_input_folder_means_the_same_keys_on_sagemaker_as_on_ec2(aws):
    """An S3Prefix channel takes every key that begins with the prefix (botocore's model,
    S3DataSource.S3Uri: "a key name prefix"), so s3://b/data/train also matched data/train-archive/.
    ec2's copy (cloudtrain_aws.node.below) takes the object the URI names or the keys below it as a
    folder.  At submit a URI naming no object becomes a folder (a trailing /): both take the same keys."""
    from cloudtrain_aws.node import below
    s3 = aws.client("s3")
    keys = ["data/train/a.txt", "data/train/sub/b.txt", "data/train-archive/old.txt", "data/trainer.py",
            "data/vocab.txt"]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    inputs = {"train": f"s3://{BUCKET}/data/train", "vocab": f"s3://{BUCKET}/data/vocab.txt",
              "whole": f"s3://{BUCKET}/data/train/"}
    provider(aws).submit(digits(**{f"storage.inputs.{k}": v for k, v in inputs.items()}))
    request = sent(aws)[0]
    validate_request("sagemaker", "CreateTrainingJob", request)
    sent_uris = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in request["InputDataConfig"]}
    for name, uri in inputs.items():
        prefix = sent_uris[name][len(f"s3://{BUCKET}/"):]
        sagemaker_takes = {k for k in keys if k.startswith(prefix)}  # S3Prefix
        ec2_takes = {k for k in keys if below(uri[len(f"s3://{BUCKET}/"):], k) is not None}
        assert sagemaker_takes == ec2_takes, (name, sent_uris[name])
    assert sent_uris["train"] == f"s3://{BUCKET}/data/train/" and sent_uris["vocab"] == inputs["vocab"]


def test_an_input_s3_will_not_answer_about_goes_as_written_with_a_warning(aws):
    """HeadObject without read permission is 403 whether or not the key exists (S3): the URI is
    sent as written and the warning says how to make it a folder."""
    from cloudtrain.spec.errors import CloudtrainWarning
    p = provider(aws)
    p.submit(digits())  # the code archive is uploaded (and looked up) once per process
    aws.fail("S3.HEAD", "forbidden", times=10)
    with pytest.warns(CloudtrainWarning, match=r"s3://ct-bucket/data/train \(input train\).*end a folder URI with /"):
        p.submit(digits(**{"storage.inputs.train": f"s3://{BUCKET}/data/train"}))
    channel = next(c for c in sent(aws)[-1]["InputDataConfig"] if c["ChannelName"] == "train")
    assert channel["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{BUCKET}/data/train"
