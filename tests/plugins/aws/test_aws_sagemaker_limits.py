"""sagemaker: the CreateTrainingJob request checked offline against the limits of botocore's own
service model (``cloudtrain_aws.limits``), which botocore's ParamValidator leaves to the service:
each one broken is exit 2 at the job file's line, and nothing is sent.

Sources: botocore's ``sagemaker`` service model (``InputDataConfig`` max 20,
``TrainingEnvironmentValue`` max 512, ``TagValue`` pattern ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*``),
read here through ``botocore.session`` to show the limits checked are the SDK's."""
import json
import subprocess
import sys

import pytest

import cloudtrain
from doubles.aws_double import validate_request
from cloudtrain.extend import plugins
from cloudtrain.spec.errors import JobFileError
from conftest import EXAMPLES, run_cli, write_job
from test_aws_node import clean_env

ROLE = "arn:aws:iam::123456789012:role/train"
BUCKET = "ct-bucket"
SETS = {"providers.sagemaker.role_arn": ROLE, "providers.sagemaker.output_s3": f"s3://{BUCKET}/runs"}
HEAD = f"""name: limits
command: python train.py
image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1
providers:
  sagemaker:
    role_arn: {ROLE}
    output_s3: s3://{BUCKET}/runs
    region: us-east-1
"""


def botocore_shape(name):
    import botocore.session
    return botocore.session.get_session().get_service_model("sagemaker").shape_for(name)


def test_the_limits_checked_are_botocores_own():
    """Every shape a CreateTrainingJob reaches has the same min, max and pattern in the file
    ``limits`` reads as in botocore's loaded service model; every pattern of a field cloudtrain
    sends can be checked."""
    from cloudtrain_aws.limits import input_shape, matches
    shapes, root = input_shape("sagemaker", "CreateTrainingJob")
    assert shapes[root]["members"].keys() == botocore_shape(root).members.keys()
    seen, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        raw, loaded = shapes[name], botocore_shape(name)
        for key in ("min", "max", "pattern"):
            assert raw.get(key) == loaded.metadata.get(key), (name, key)
        todo += [m["shape"] for m in raw.get("members", {}).values()]
        todo += [raw[k]["shape"] for k in ("member", "key", "value") if k in raw]
    sent = {"TrainingJobName", "RoleArn", "AlgorithmImage", "TrainingContainerEntrypointString",
            "TrainingContainerArgument", "ChannelName", "S3Uri", "TagKey", "TagValue", "TrainingEnvironmentKey",
            "TrainingEnvironmentValue", "SubnetId", "SecurityGroupId", "DirectoryPath"}
    for name in sent:
        assert matches(shapes[name]["pattern"], "x") is not None, name


@pytest.mark.parametrize("value,ok", [("team a/b=c+d@e:f_g.h-i", True), ("café 42", True), ("a,b", False),
                                      ("a#b", False), ("x;y", False)])
def test_tag_values_follow_java_unicode_classes(value, ok):
    from cloudtrain_aws.limits import matches
    assert matches(botocore_shape("TagValue").metadata["pattern"], value) is ok


def check(tmp_path, body):
    path = write_job(tmp_path, HEAD + body)
    proc = run_cli("validate", "-p", "sagemaker", path)
    return path, proc


def test_more_than_20_channels_is_exit_2_at_the_inputs_line(tmp_path):
    inputs = "".join(f"    in{i}: s3://{BUCKET}/data/{i}/\n" for i in range(20))
    path, proc = check(tmp_path, "storage:\n  inputs:\n" + inputs)
    assert proc.returncode == 2, proc.stderr
    line = (HEAD + "storage:\n  inputs:\n").count("\n")  # the `inputs:` key
    assert f"{path}:{line}: storage.inputs: " in proc.stderr and "21 items; at most 20" in proc.stderr, proc.stderr
    inputs = "".join(f"    in{i}: s3://{BUCKET}/data/{i}/\n" for i in range(19))  # 19 + the code channel
    assert check(tmp_path, "storage:\n  inputs:\n" + inputs)[1].returncode == 0


def test_an_environment_value_over_512_characters_is_exit_2_at_its_line(tmp_path):
    path, proc = check(tmp_path, "env:\n  SHORT: x\n  LONG: " + "y" * 513 + "\n")
    assert proc.returncode == 2, proc.stderr
    line = HEAD.count("\n") + 3
    assert f"{path}:{line}: env.LONG: " in proc.stderr and "513 characters; at most 512" in proc.stderr, proc.stderr
    assert "SHORT" not in proc.stderr


def test_tag_values_with_a_comma_or_hash_are_exit_2_each_at_its_line(tmp_path):
    path, proc = check(tmp_path, "    tags:\n      team: a,b\n      ok: fine\n      cost: x#1\n")
    assert proc.returncode == 2, proc.stderr
    lines = HEAD.count("\n")
    assert f"{path}:{lines + 2}: providers.sagemaker.tags.team: " in proc.stderr, proc.stderr
    assert f"{path}:{lines + 4}: providers.sagemaker.tags.cost: " in proc.stderr, proc.stderr
    assert "tags.ok" not in proc.stderr


def test_a_job_name_or_retry_count_out_of_range_is_said_at_its_field(tmp_path):
    path, proc = check(tmp_path, "max_restarts: 31\n")
    assert proc.returncode == 2 and f"{path}:{HEAD.count(chr(10)) + 1}: max_restarts: " in proc.stderr, proc.stderr
    assert "at most 30" in proc.stderr


@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, BUCKET)


def test_nothing_is_sent_for_a_request_over_the_limits(aws):
    job = cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml",
                              overrides={**SETS, "providers.sagemaker.tags.team": "a,b"})
    with pytest.raises(JobFileError, match="providers.sagemaker.tags.team"):
        plugins.get_provider("sagemaker", **aws.clients()).submit(job)
    assert sum(aws.calls.values()) == 0


def test_six_secrets_with_arns_fit_and_every_node_reads_them_all(aws, monkeypatch, tmp_path):
    """Six Secrets Manager ARNs made CLOUDTRAIN_SECRET_IDS 600 characters (SageMaker refuses a
    value over 512): the ids are split over CLOUDTRAIN_SECRET_IDS, _1, ... and the node prelude
    reads every one."""
    sm = aws.client("secretsmanager")
    names = [f"SECRET_NUMBER_{i}" for i in range(6)]
    overrides = dict(SETS)
    for i, name in enumerate(names):
        arn = sm.create_secret(Name=f"cloudtrain/team-training-secret-{i}", SecretString=f"value-{i}")["ARN"]
        monkeypatch.setenv(f"CT_{name}", f"value-{i}")
        overrides[f"secrets.{name}.from_env"] = f"CT_{name}"
        overrides[f"providers.sagemaker.secrets_manager.{name}"] = arn
    job = cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml", overrides=overrides)
    plugins.get_provider("sagemaker", **aws.clients()).submit(job)
    request = [p for s, a, p in aws.requests if a == "CreateTrainingJob"][0]
    validate_request("sagemaker", "CreateTrainingJob", request)  # every value <= 512 characters
    env = request["Environment"]
    secret_ids = dict(sorted((n, overrides[f"providers.sagemaker.secrets_manager.{n}"]) for n in names))
    assert len(json.dumps(secret_ids)) > 512
    ids = {k: v for k, v in env.items() if k.startswith("CLOUDTRAIN_SECRET_IDS")}
    assert len(ids) > 1 and "CLOUDTRAIN_SECRET_IDS" in ids
    probe = "import json, os; print(json.dumps(json.load(open(os.environ['CLOUDTRAIN_SECRETS_FILE']))))"
    node_env = clean_env(**aws.env(**ids, CLOUDTRAIN_SECRETS_DIR=str(tmp_path)))
    out = subprocess.run([sys.executable, "-m", "cloudtrain_aws.node", "--", sys.executable, "-c", probe],
                         env=node_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {name: f"value-{i}" for i, name in enumerate(names)}


def test_many_variables_fit_and_the_launcher_gets_every_name(tmp_path):
    """CLOUDTRAIN_ENV_NAMES (the job's variable names, which mpirun forwards) is cloudtrain's own
    value: 60 names of 15 characters made it 959, past SageMaker's 512.  It is split over
    CLOUDTRAIN_ENV_NAMES, _1, ... and the node prelude joins it before the launcher."""
    from test_aws_sagemaker_render import as_sent, job, render
    names = [f"MY_SETTING_{i:04d}" for i in range(60)]
    request = render(job(env={n: "1" for n in names}))["sagemaker/CreateTrainingJob"]
    validate_request("sagemaker", "CreateTrainingJob", as_sent(request))
    parts = {k: v for k, v in request["Environment"].items() if k.startswith("CLOUDTRAIN_ENV_NAMES")}
    assert len(parts) > 1
    probe = "import os; print(os.environ['CLOUDTRAIN_ENV_NAMES'])"
    out = subprocess.run([sys.executable, "-m", "cloudtrain_aws.node", "--", sys.executable, "-c", probe],
                         env=clean_env(**parts), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split(",") == sorted(names)


@pytest.mark.parametrize("options,extra,field", [
    ({"role_arn": "arn:aws:iam::123:role/x"}, {}, "providers.sagemaker.role_arn"),  # RoleArn: \d{12} account
    # SubnetId [-0-9a-zA-Z]+
    ({"subnets": ["subnet_1"], "security_group_ids": ["sg-1"]}, {}, "providers.sagemaker.subnets"),
    ({"keep_alive_seconds": 0, "run_label": "a#b"}, {}, "providers.sagemaker.run_label"),  # TagValue
    ({}, {"image": "1" * 256}, "image"),  # AlgorithmImage: at most 255
])
def test_each_field_out_of_the_models_limits_is_named(options, extra, field):
    """botocore's sagemaker model: RoleArn pattern arn:aws[a-z\\-]*:iam::\\d{12}:role/..., SubnetId
    [-0-9a-zA-Z]+, TagValue, AlgorithmImage max 255."""
    from test_aws_sagemaker_render import job
    with pytest.raises(JobFileError) as info:
        plugins.get_provider("sagemaker").render(job(options=options, **extra))
    assert str(info.value).startswith(f"{field}: "), str(info.value)
