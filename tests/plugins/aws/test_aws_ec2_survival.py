"""ec2: the neutral spot, max_runtime and storage.checkpoint (issue 19): RunInstances' spot market
options and SSM's executionTimeout checked with botocore's models, and the node script's
checkpoint sync run for real against a directory standing in for S3."""
import os
import shutil
import subprocess

import pytest

from doubles.aws_double import validate_request
from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from conftest import write_job
from test_aws_ec2 import artifacts, filled, job

import json

SURVIVE = {"spot": True, "max_runtime": "12h", "storage": {"checkpoint": "s3://team/ckpt/digits/"}}


def test_spot_and_max_runtime_are_the_instances_market_and_the_scripts_timeout():
    arts = artifacts(job(**SURVIVE))
    for a in arts:
        service, _, operation = a.kind.partition("/")
        if service in ("ec2", "ssm"):
            validate_request(service, operation, json.loads(filled(json.dumps(a.content))))
    run = next(a.content for a in arts if a.kind == "ec2/RunInstances")
    assert run["InstanceMarketOptions"] == {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}
    send = next(a.content for a in arts if a.kind == "ssm/SendCommand")
    assert send["Parameters"]["executionTimeout"] == ["43200"]
    plain = artifacts(job())
    assert "InstanceMarketOptions" not in next(a.content for a in plain if a.kind == "ec2/RunInstances")


def test_max_runtime_beyond_what_ssm_runs_is_refused(tmp_path):
    # SSM's AWS-RunShellScript document, parameter executionTimeout: "Maximum is 172800 (48 hours)"
    path = write_job(tmp_path, "name: e\ncommand: python t.py\nmax_runtime: 3d\n")
    from cloudtrain.extend import plugins
    with pytest.raises(JobFileError) as info:
        plugins.get_provider("ec2").render(load_job(path))
    assert str(info.value).startswith(f"{path}:3: max_runtime: 3d is longer than the 2d SSM allows a node's script")


FAKE_AWS = """#!/bin/sh
# `aws s3 sync [--only-show-errors] SRC DST` over a directory that stands in for S3 ($FAKE_S3)
[ "$1 $2" = "s3 sync" ] || exit 9
shift 2; [ "$1" = "--only-show-errors" ] && shift
map() { case "$1" in s3://*) echo "$FAKE_S3/${1#s3://}";; *) echo "$1";; esac; }
src=$(map "$1"); dst=$(map "$2"); mkdir -p "$src" "$dst"; cp -R "$src/." "$dst/"
"""


def test_the_node_script_brings_back_the_last_checkpoint_and_saves_the_new_one(tmp_path):
    """The script's checkpoint lines, run twice as two attempts would: the second sees what the
    first saved (through 'S3'), and what it saves reaches 'S3' when the node ends."""
    [script] = [a.content["script"] for a in artifacts(job(**SURVIVE)) if a.name == "nodes"]
    start = script.index("# storage.checkpoint")
    end = script.index("\n", script.index("ckpt_stop() {")) + 1
    tail = script[script.index("\nckpt_stop\n") + 1:].splitlines()[:2]  # after the launcher: stop, last upload
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_S3": str(tmp_path / "s3")}
    for attempt in (1, 2):
        work = tmp_path / f"work-{attempt}"  # a new instance: nothing on its disk
        body = (f"set -eu\nWORK={work}\n" + script[start:end]
                + 'ls "$CLOUDTRAIN_CHECKPOINT_DIR" > seen.txt\n'
                + f'echo {attempt} > "$CLOUDTRAIN_CHECKPOINT_DIR/epoch-{attempt}"\n' + "\n".join(tail) + "\n")
        proc = subprocess.run(["sh", "-c", body], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "seen.txt").read_text().split() == [f"epoch-{n}" for n in range(1, attempt)]
    assert sorted(os.listdir(tmp_path / "s3" / "team" / "ckpt" / "digits")) == ["epoch-1", "epoch-2"]
    for shell in [s for s in ("sh", "dash", "bash") if shutil.which(s)]:
        assert subprocess.run([shell, "-n"], input=filled(script), text=True).returncode == 0


def test_a_checkpoint_outside_s3_is_refused(tmp_path):
    path = write_job(tmp_path, "name: e\ncommand: python t.py\nstorage: {checkpoint: 'pvc://c/x'}\n")
    from cloudtrain.extend import plugins
    with pytest.raises(JobFileError, match=r"job.yaml:3: storage.checkpoint: ec2 keeps checkpoints under s3://"):
        plugins.get_provider("ec2").render(load_job(path))
