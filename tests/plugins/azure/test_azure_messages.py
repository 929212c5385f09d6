"""azure: what a user reads when something is missing (issue 30, item 8) -- one line each, as on
every other cloud.

- No credentials anywhere: the real azure-identity chain (``DefaultAzureCredential``) runs in a
  ``cloudtrain`` subprocess with no credentials of any kind and every request sent to a recording
  listener (tests/plugins/test_missing_credentials.py's environment).  azure-identity logs the
  whole chain's diagnostics as a WARNING when no credential gives a token
  (``azure/identity/_credentials/chained.py``: ``_LOGGER.warning(message)``), which Python's
  last-resort handler printed as ~15 lines before cloudtrain's own: stderr is now that one line.
- The workspace's three names: validate names each missing one (tests/contract/
  test_required_settings.py), and says how to name the workspace once, not three times.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import run_cli, write_job

from plugins.test_missing_credentials import METADATA, Listener, bare_env  # noqa: E402

pytest.importorskip("azure.identity")

SUB, RG, WS = "00000000-0000-0000-0000-000000000000", "rg", "ws"
WORKSPACE = [f"--set=providers.azure.{k}={v}" for k, v in
             {"subscription_id": SUB, "resource_group": RG, "workspace": WS, "compute": "gpu-cluster"}.items()]


@pytest.fixture(scope="module")
def listener():
    listener = Listener()
    yield listener
    listener.sock.close()


def job_file(tmp_path):
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    return write_job(tmp_path, """
        name: creds
        code: code
        command: python train.py
        image: python:3.11
        distribution: {type: ddp, nodes: 2}
        """)


@pytest.mark.parametrize("command", [
    ["submit", "-p", "azure", "JOB", *WORKSPACE],
    ["status", f"azure://{SUB}/{RG}/{WS}/creds-0123456789"],
])
def test_no_credentials_is_one_line_and_exit_3(command, tmp_path, listener):
    job = job_file(tmp_path)
    argv = [str(job) if part == "JOB" else part for part in command]
    before = len(listener.requests)
    proc = subprocess.run([sys.executable, "-m", "cloudtrain", *argv], env=bare_env(tmp_path, listener.port),
                          cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cloudtrain: error: no Azure credentials found (looked in: DefaultAzureCredential's ")
    assert "az login" in lines[0] and "FailedDACCredential" not in lines[0]  # the credential's own name
    assert [r for r in listener.requests[before:] if not METADATA.match(r)] == []


def test_the_workspace_hint_is_said_once(tmp_path):
    job = job_file(tmp_path)
    proc = run_cli("validate", "-p", "azure", job, cwd=tmp_path, check=2,
                   env={"HOME": str(tmp_path), "CLOUDTRAIN_HOME": str(tmp_path / "ct")})
    lines = proc.stderr.splitlines()
    for option in ("subscription_id", "resource_group", "workspace"):
        assert sum(f"providers.azure.{option}: is not set" in line for line in lines) == 1, proc.stderr
    assert proc.stderr.count("Download config.json") == 1, proc.stderr
    assert proc.stderr.count("name the workspace with subscription_id, resource_group and workspace") == 1
