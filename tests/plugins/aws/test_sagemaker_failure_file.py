"""Issue 40: a failed SageMaker node's launcher writes its one-line reason to /opt/ml/output/failure.

SageMaker Developer Guide, "How Amazon SageMaker Processes Training Output"
(your-algorithms-training-algo-output): "/opt/ml/output/failure – If training fails, after all
algorithm output (for example, logging) completes, your algorithm should write the failure
description to this file. In a DescribeTrainingJob response, SageMaker returns the first 1024
characters from this file as FailureReason."  The SageMaker SDK's drivers do the same
(aws/sagemaker-python-sdk, container_drivers/common/utils.py ``write_failure_file``, which leaves an
existing file alone); cloudtrain's ContainerEntrypoint bypasses them, so the launcher writes it,
where the sagemaker detector says (``Topology.failure_file``), never on an emulated node.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from cloudtrain.extend import plugins
from cloudtrain.launch.failure import write_reason
from cloudtrain.providers.provider import Cluster
from cloudtrain_aws.detect import FAILURE_FILE, detect_sagemaker

ROOT = Path(plugins.__file__).resolve().parents[2]  # this checkout's core and plugins


def node(tmp_path, *command, kind="ddp", **extra):
    """``cloudtrain launch`` on a one-instance SageMaker node (resourceconfig.json as SageMaker writes it,
    with the loopback address standing for algo-1, which does not resolve here)."""
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "127.0.0.1", "hosts": ["127.0.0.1"],
                                  "current_instance_type": "ml.m5.xlarge"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDTRAIN_", "SM_", "PET_"))}
    env.update(PYTHONPATH=os.pathsep.join(str(ROOT / d) for d in ("core", "plugins")),
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               CLOUDTRAIN_SM_RESOURCECONFIG=str(config), CLOUDTRAIN_SM_FAILURE_FILE=str(tmp_path / "failure"),
               CLOUDTRAIN_OUTPUT_DIR=str(tmp_path / "model"), TRAINING_JOB_NAME="fails-0123456789ab", **extra)
    return subprocess.run([sys.executable, "-m", "cloudtrain.launch", "--platform", "sagemaker", "--type", kind,
                           "--nproc-per-node", "1", "--", *command],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_a_failed_rank_is_the_failure_reason(tmp_path):
    proc = node(tmp_path, "python", "-c", "import sys; sys.stderr.write('CUDA out of memory\\n'); sys.exit(7)")
    assert proc.returncode == 7, proc.stderr
    reason = (tmp_path / "failure").read_text()
    assert reason.startswith("node 0 rank 0 exited with code 7"), reason
    assert "CUDA out of memory" in reason and "\n" not in reason  # the launcher's one line


def test_a_secret_the_rank_printed_never_reaches_the_failure_reason(tmp_path):
    """FailureReason is read by anyone who may DescribeTrainingJob: the job's secrets (what the node
    prelude put in CLOUDTRAIN_SECRETS_FILE) are masked in it."""
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"HF_TOKEN": "hf_secret_value_1234"}))
    secrets.chmod(0o600)
    script = "import os, sys; sys.stderr.write('bad token ' + os.environ['HF_TOKEN'] + '\\n'); sys.exit(3)"
    proc = node(tmp_path, "python", "-c", script, CLOUDTRAIN_SECRETS_FILE=str(secrets))
    assert proc.returncode == 3, proc.stderr
    reason = (tmp_path / "failure").read_text()
    assert "bad token ***" in reason and "hf_secret_value_1234" not in reason


def test_a_command_not_found_is_the_failure_reason_and_a_success_writes_none(tmp_path):
    proc = node(tmp_path, "no-such-trainer", "--epochs", "1")
    assert proc.returncode == 127
    assert (tmp_path / "failure").read_text().startswith("no-such-trainer: command not found")
    (tmp_path / "failure").unlink()
    assert node(tmp_path, "python", "-c", "pass").returncode == 0
    assert not (tmp_path / "failure").exists()


def test_the_reason_never_replaces_what_is_there_nor_follows_a_link(tmp_path):
    first = tmp_path / "failure"
    first.write_text("the script's own words")
    write_reason(str(first), "node 0 rank 0 exited with code 1")
    assert first.read_text() == "the script's own words"
    target = tmp_path / "elsewhere"
    link = tmp_path / "link"
    link.symlink_to(target)  # a dangling link another user could have made: not written through
    write_reason(str(link), "x")
    assert not target.exists()
    long = tmp_path / "long"
    write_reason(str(long), "y" * 5000 + "\nsecond line")
    assert long.read_text() == "y" * 1024  # SageMaker keeps the first 1024 characters


def test_only_a_real_sagemaker_node_has_a_failure_file(tmp_path):
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    real = detect_sagemaker({"CLOUDTRAIN_SM_RESOURCECONFIG": str(config)})
    assert real.failure_file == (FAILURE_FILE if os.path.isdir("/opt/ml/output") else None)
    assert FAILURE_FILE == "/opt/ml/output/failure"
    cls = plugins.get_provider_class("sagemaker")
    from cloudtrain.input.loading import job_from_dict
    job = job_from_dict({"name": "emu", "command": "python t.py", "distribution": {"type": "ddp", "nodes": 1}})
    emulated = cls.environment(job, 0, Cluster(hosts=["127.0.0.1"], master_port=29500))
    assert detect_sagemaker(emulated).failure_file is None  # this machine's /opt/ml is not SageMaker's
