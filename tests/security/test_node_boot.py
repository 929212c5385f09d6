"""The nodes that have no cloudtrain installed check the real archive before they unpack it: the
rendered SageMaker entrypoint and EC2 node script run here for real (the image's Python is this
interpreter; only what comes after the unpack is stubbed), with the archive submit uploads, and
with that archive changed in the bucket."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cloudtrain.transfer import shipping
from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider
from test_node_shell_corpus import SH, base_job

# The image's python3: the real interpreter, except for the launcher (its call is recorded)
PYTHON = f"""#!/bin/sh
case "$*" in
  *cloudtrain_aws.node*) echo "$PWD" >>"$LAUNCHED"; exit 0 ;;
esac
exec {sys.executable} "$@"
"""


def code(tmp_path, provider):
    job = base_job(provider, tmp_path, "--epochs=1")
    job["providers"][provider]["python"] = "python3"
    if provider == "ec2":
        job["providers"][provider]["terminate_when_done"] = False
    job = job_from_dict(job)
    prov = get_provider(provider)
    archive, sha = shipping.packed(job, (prov.detector_target(), *prov.node_modules))  # what a submit ships
    return job, prov, archive.read_bytes(), sha


def node_env(tmp_path, **extra):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(PYTHON)
    (bin_dir / "python3").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "LAUNCHED": str(tmp_path / "launched"),
            **extra}


@pytest.mark.parametrize("changed", [False, True], ids=["as-uploaded", "changed-in-s3"])
def test_sagemaker_entrypoint_checks_the_archive(tmp_path, changed):
    job, prov, data, sha = code(tmp_path, "sagemaker")
    request = json.loads(json.dumps(prov.render(job).artifacts[1].content).replace("<code-digest>", sha))
    spec = request["AlgorithmSpecification"]
    channel = tmp_path / "channel"
    channel.mkdir()
    (channel / "code.tar.gz").write_bytes(data + (b"\0" * 512 if changed else b""))
    env = node_env(tmp_path, SM_CHANNEL_CODE=str(channel), CLOUDTRAIN_CODE_DIR=str(tmp_path / "code-dir"))
    proc = subprocess.run(spec["ContainerEntrypoint"] + spec["ContainerArguments"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    if changed:
        assert proc.returncode != 0 and "sha256 differs" in proc.stderr
        assert not (tmp_path / "code-dir").exists() or not any((tmp_path / "code-dir").iterdir())
        assert not (tmp_path / "launched").exists()
    else:
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "code-dir" / "train.py").is_file()
        assert (tmp_path / "code-dir" / ".cloudtrain" / "cloudtrain" / "launch" / "unpack.py").is_file()
        assert (tmp_path / "launched").read_text().strip() == str(tmp_path / "code-dir")


@pytest.mark.parametrize("changed", [False, True], ids=["as-uploaded", "changed-in-s3"])
def test_ec2_node_script_checks_the_archive(tmp_path, changed):
    job, prov, data, sha = code(tmp_path, "ec2")
    archive = tmp_path / "in-s3.tar.gz"
    archive.write_bytes(data + (b"\0" * 512 if changed else b""))
    script = next(a.content["script"] for a in prov.render(job).artifacts
                  if a.kind == "shell/script" and a.name == "nodes")
    for placeholder, value in (("<job-id>", "corpus-aaaaaaaaaaaa"), ("<code-digest>", sha),
                               ("<presigned-code-url>", archive.as_uri()), ("<instance-ids>", "i-0,i-1"),
                               ("<master-ip>", "10.0.0.4"), ("<node-ips>", "10.0.0.4,10.0.0.5"),
                               ("<hosts-lines>", "10.0.0.4 ct-node-0")):
        script = script.replace(placeholder, value)
    script = script.replace("/etc/hosts", str(tmp_path / "hosts"))
    proc = subprocess.run([SH], input=script, env=node_env(tmp_path, AWS_SSM_INSTANCE_ID="i-0"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    code_dir = tmp_path / "work" / "corpus-aaaaaaaaaaaa" / "code"
    if changed:
        assert proc.returncode != 0 and "sha256 differs" in proc.stderr
        assert "failed while checking and unpacking the code" in proc.stderr
        assert not code_dir.exists() and not (tmp_path / "launched").exists()
    else:
        assert proc.returncode == 0, proc.stderr
        assert (code_dir / "train.py").is_file() and (code_dir / ".cloudtrain" / "cloudtrain_aws" / "node.py").is_file()
        assert (tmp_path / "launched").read_text().strip() == str(code_dir)
