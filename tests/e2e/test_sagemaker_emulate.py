"""SageMaker's node environment, emulated locally, really trains the digits example: every node
gets what a SageMaker instance gives a container that bypasses the training toolkit (as
cloudtrain's ContainerEntrypoint does): TRAINING_JOB_NAME and resourceconfig.json's content, no
SM_* variable; `cloudtrain launch` resolves the topology with the aws plugin's detector."""
import json
import re

import pytest

from conftest import EXAMPLES, run_cli
from helpers import assert_nothing_left, handle_from, metrics, run_dir

pytestmark = pytest.mark.e2e


def test_digits_ddp_trains_under_sagemakers_environment(home):
    job = EXAMPLES / "digits-ddp" / "job.yaml"
    proc = run_cli("submit", "-p", "local", "--emulate", "sagemaker", job, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    handle = handle_from(proc.stderr)
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 4
    ranks = set(re.findall(r"^\[node(\d)/rank(\d)\] rank \d/4", proc.stdout, re.M))
    assert ranks == {("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")}
    # the nodes got SageMaker's variables (not the generic CLOUDTRAIN_* ones) and its detector
    plan = json.loads((run_dir(home, handle) / "plan.json").read_text())
    for index, node in enumerate(plan["nodes"]):
        env = node["env"]
        assert env["CLOUDTRAIN_DETECTORS"] == "sagemaker=cloudtrain_aws.detect:detect_sagemaker"
        assert json.loads(env["CLOUDTRAIN_SM_RESOURCECONFIG_JSON"])["hosts"] == ["127.0.0.1"] * 2
        assert env["CLOUDTRAIN_SM_HOST_RANK"] == str(index) and env["TRAINING_JOB_NAME"] == "digits-ddp"
        assert not [k for k in env if k.startswith("SM_")]  # the toolkit's, not the platform's (issue 40)
        assert "CLOUDTRAIN_NUM_NODES" not in env
    assert "SUCCEEDED" in proc.stderr
    assert_nothing_left(run_dir(home, handle))
