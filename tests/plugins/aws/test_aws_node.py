"""What runs in an AWS node: the node prelude (secrets from Secrets Manager, job id, exec), and the
SageMaker container command as submitted, run here: it unpacks the code channel's archive, reads
resourceconfig.json and trains."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cloudtrain
from doubles.aws_double import AwsDouble, outputs_of
from cloudtrain.extend import plugins
from conftest import EXAMPLES

VENV_PATH = f"{Path(sys.executable).parent}:{os.environ['PATH']}"


@pytest.fixture(scope="module")
def aws():
    with AwsDouble() as double:
        yield double


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLOUDTRAIN_", "PET_", "SM_", "AWS_")) and k not in ("RANK", "WORLD_SIZE")}
    root = Path(plugins.__file__).resolve().parents[2]  # this checkout's core and plugins, not the venv's
    env.update(PATH=VENV_PATH, PYTHONPATH=os.pathsep.join(str(root / d) for d in ("core", "plugins")))
    env.update(extra)
    return env


def test_the_prelude_puts_secrets_in_a_private_file_for_the_launcher(aws, tmp_path):
    sm = aws.client("secretsmanager")
    sm.create_secret(Name="cloudtrain/hf", SecretString="hf-tok-7f3a")
    arn = sm.create_secret(Name="cloudtrain/db", SecretString=json.dumps({"password": "pw-91c2"}))["ARN"]
    ids = {"HF_TOKEN": "cloudtrain/hf", "DB_PASSWORD": f"{arn}#password"}
    probe = ("import json, os, stat; p = os.environ['CLOUDTRAIN_SECRETS_FILE']; "
             "print(json.dumps({'mode': oct(stat.S_IMODE(os.stat(p).st_mode)), 'values': json.load(open(p)), "
             "'job': os.environ['CLOUDTRAIN_JOB_ID']}))")
    env = clean_env(**aws.env(CLOUDTRAIN_SECRET_IDS=json.dumps(ids), TRAINING_JOB_NAME="job-0123456789ab",
                              CLOUDTRAIN_SECRETS_DIR=str(tmp_path)))
    out = subprocess.run([sys.executable, "-m", "cloudtrain_aws.node", "--", sys.executable, "-c", probe],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen == {"mode": "0o600", "values": {"HF_TOKEN": "hf-tok-7f3a", "DB_PASSWORD": "pw-91c2"},
                    "job": "job-0123456789ab"}
    # through the launcher: the command sees the value, the launcher's own view does not print it
    cmd = [sys.executable, "-m", "cloudtrain_aws.node", "--", sys.executable, "-m", "cloudtrain.launch",
           "--type", "none", "--", sys.executable, "-c", "import os; print('token', os.environ['HF_TOKEN'])"]
    out = subprocess.run(cmd, env=dict(env, CLOUDTRAIN_NUM_NODES="1", CLOUDTRAIN_NODE_RANK="0",
                                       CLOUDTRAIN_OUTPUT_DIR=str(tmp_path / "out")),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "token hf-tok-7f3a" in out.stdout, out.stderr


def test_a_missing_secret_stops_the_node_naming_the_id_not_a_value(aws, tmp_path):
    env = clean_env(**aws.env(CLOUDTRAIN_SECRET_IDS=json.dumps({"X": "cloudtrain/absent"})))
    out = subprocess.run([sys.executable, "-m", "cloudtrain_aws.node", "--", "true"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3 and "cloudtrain/absent" in out.stderr and "GetSecretValue" in out.stderr


def node_copy(aws, *args):
    return subprocess.run([sys.executable, "-m", "cloudtrain_aws.node", "copy", *args], env=clean_env(**aws.env()),
                          capture_output=True, text=True, timeout=60)


def test_copy_brings_an_s3_folder_or_one_object_down_and_a_directory_up(aws, tmp_path):
    """The ec2 node script's storage.inputs / storage.output, through boto3 against the double: a
    prefix is a folder (data/train2 is not in data/train), a URI naming an object gives that file."""
    s3 = aws.client("s3")
    s3.create_bucket(Bucket="ct-copy")
    for key in ("data/train/a.csv", "data/train/sub/b.csv", "data/train2/no.csv", "data/vocab.txt", "data/train/"):
        s3.put_object(Bucket="ct-copy", Key=key, Body=key.encode())
    out = node_copy(aws, "s3://ct-copy/data/train", str(tmp_path / "train"))
    assert out.returncode == 0, out.stderr
    files = sorted(str(p.relative_to(tmp_path / "train")) for p in (tmp_path / "train").rglob("*") if p.is_file())
    assert files == ["a.csv", "sub/b.csv"] and (tmp_path / "train/sub/b.csv").read_text() == "data/train/sub/b.csv"
    assert node_copy(aws, "s3://ct-copy/data/vocab.txt", str(tmp_path / "vocab")).returncode == 0
    assert [p.name for p in (tmp_path / "vocab").iterdir()] == ["vocab.txt"]
    (tmp_path / "out/sub").mkdir(parents=True)
    (tmp_path / "out/metrics.json").write_text("{}")
    (tmp_path / "out/sub/model.pt").write_bytes(b"\0" * 10)
    out = node_copy(aws, str(tmp_path / "out"), "s3://ct-copy/runs/job-0123456789ab")
    assert out.returncode == 0 and "copied 2 file(s)" in out.stdout, out.stderr
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="ct-copy", Prefix="runs/")["Contents"])
    assert keys == ["runs/job-0123456789ab/metrics.json", "runs/job-0123456789ab/sub/model.pt"]
    missing = node_copy(aws, "s3://ct-copy/absent/", str(tmp_path / "x"))
    assert missing.returncode == 3 and "nothing is stored at s3://ct-copy/absent/" in missing.stderr
    assert "s3:GetObject" in missing.stderr
    assert node_copy(aws, "s3://ct-copy/a", "s3://ct-copy/b").returncode == 2


def test_the_sagemaker_container_command_trains_from_the_code_channel(aws, tmp_path, monkeypatch):
    """Play SageMaker: for each of 2 hosts, put the code channel's object where SageMaker would,
    write resourceconfig.json, and run ContainerEntrypoint + ContainerArguments as sent."""
    from cloudtrain_local.ports import free_port_block
    from cloudtrain.transfer.objectstore import forget_uploads
    forget_uploads()
    monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0")
    aws.client("s3").create_bucket(Bucket="ct-node-bucket")
    job = cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml", overrides={
        "providers.sagemaker.role_arn": "arn:aws:iam::123456789012:role/train",
        "providers.sagemaker.output_s3": "s3://ct-node-bucket/out", "command": "python train.py --epochs 2",
        "distribution.procs_per_node": 1})
    run = plugins.get_provider("sagemaker", **aws.clients()).submit(job)
    name = run.id.split("/")[1]
    request = next(p for s, a, p in aws.requests if a == "CreateTrainingJob" and p["TrainingJobName"] == name)
    uri = request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
    bucket, key = re.match(r"s3://([^/]+)/(.+)", uri).groups()
    archive = aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    hosts = ["127.0.0.1", "127.0.0.2"]  # two loopback addresses stand for algo-1 and algo-2
    port = free_port_block(3)
    spec = request["AlgorithmSpecification"]
    procs = []
    for i, host in enumerate(hosts):
        node = tmp_path / f"algo-{i + 1}"
        (node / "input/data/code").mkdir(parents=True)
        (node / "input/data/code/code.tar.gz").write_bytes(archive)
        (node / "resourceconfig.json").write_text(json.dumps({"current_host": host, "hosts": hosts,
                                                              "current_instance_type": "ml.m5.xlarge"}))
        env = clean_env(**request["Environment"])
        env.update(SM_CHANNEL_CODE=str(node / "input/data/code"), CLOUDTRAIN_CODE_DIR=str(node / "code"),
                   CLOUDTRAIN_SM_RESOURCECONFIG=str(node / "resourceconfig.json"), SM_MASTER_PORT=str(port),
                   SM_MODEL_DIR=str(node / "model"), TRAINING_JOB_NAME=name, PYTHONPATH="")
        procs.append(subprocess.Popen(spec["ContainerEntrypoint"] + spec["ContainerArguments"], env=env, cwd=node,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = outputs_of(procs)
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert float(re.search(r"test_accuracy ([0-9.]+)", outputs[0]).group(1)) >= 0.9, outputs[0]
    assert "rank 1/2 local_rank 0 on node 1" in outputs[1]
    metrics = json.loads((tmp_path / "algo-1" / "model" / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    # the launcher, the detector and the code came from the archive, not from this checkout
    assert (tmp_path / "algo-2" / "code" / ".cloudtrain" / "cloudtrain_aws" / "detect.py").is_file()


# -- what an AWS Deep Learning Container's own entrypoint does, which ContainerEntrypoint skips ----
# aws/deep-learning-containers, pytorch/training/docker/build_artifacts/start_with_right_hostname.sh:
# start_cuda_compat.sh, then for `train`: sed PLACEHOLDER_HOSTNAME -> jq .current_host (quoted) in
# changehostname.c, gcc -fPIC, gcc -shared -export-dynamic ... -ldl, LD_PRELOAD=libchangehostname.so.
CHANGEHOSTNAME_C = """#include <stdio.h>
#include <string.h>

int gethostname(char *name, size_t len)
{
  const char *val = PLACEHOLDER_HOSTNAME;
  strncpy(name, val, len);
  return 0;
}
"""


def test_the_prelude_preloads_the_images_changehostname_for_sagemakers_host_name(tmp_path):
    from cloudtrain_aws.node import dlc_environment
    source = tmp_path / "changehostname.c"
    source.write_text(CHANGEHOSTNAME_C)
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-1", "algo-2"]}))
    work = tmp_path / "work"
    work.mkdir()
    env = dlc_environment({}, cuda_home=str(tmp_path / "no-cuda"), sources=(str(source),), driver="",
                          workdir=str(work), resource_config=str(config))
    assert set(env) == {"LD_PRELOAD"}
    out = subprocess.run([sys.executable, "-c", "import socket; print(socket.gethostname())"],
                         env=dict(os.environ, **env), capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "algo-2", out.stderr
    # an image without the source (not a DLC): nothing changes
    assert dlc_environment({}, cuda_home=str(tmp_path), sources=(str(tmp_path / "absent.c"),), driver="",
                           resource_config=str(config)) == {}


@pytest.mark.parametrize("driver,compat,added", [("535.104.05", "550.54.15", True), ("550.54.15", "550.54.15", False),
                                                 ("560.35.03", "550.54.15", False), ("", "550.54.15", False)])
def test_cuda_forward_compat_libraries_go_first_when_the_driver_is_older(tmp_path, driver, compat, added):
    """start_cuda_compat.sh: compat max = readlink compat/libcuda.so.1 after `libcuda.so.`; added to
    LD_LIBRARY_PATH when the driver is strictly older (verlte returns 1 for equal versions)."""
    from cloudtrain_aws.node import dlc_environment
    (tmp_path / "compat").mkdir()
    (tmp_path / "compat" / f"libcuda.so.{compat}").write_text("")
    (tmp_path / "compat" / "libcuda.so.1").symlink_to(f"libcuda.so.{compat}")
    env = dlc_environment({"LD_LIBRARY_PATH": "/opt/x"}, cuda_home=str(tmp_path), sources=(), driver=driver)
    assert env == ({"LD_LIBRARY_PATH": f"{tmp_path / 'compat'}:/opt/x"} if added else {})
