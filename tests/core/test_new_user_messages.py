"""The messages a new user met (issue 44, item 8), through the real command line: each names
the problem and the next step, and none is a raw parser error or a class name."""
import json
import signal
import subprocess
import sys

import pytest

from conftest import run_cli, write_job
from test_run_retention import ended_run

SLEEPER = 'name: sleeper\ncommand: [python, -c, "import time; time.sleep(300)"]\ndistribution: {type: none}\n'


def _one_error(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def test_outputs_of_an_unknown_handle_names_the_problem(tmp_path, home):
    ended_run(home, "other", 1)  # a state store exists, without this job
    line = _one_error(run_cli("outputs", "local://nope-123456", "--dest", tmp_path / "out"))
    assert "no local job 'nope-123456'" in line and "cloudtrain list" in line, line
    assert not (tmp_path / "out").exists()


def test_after_prune_status_and_logs_say_the_job_was_pruned(tmp_path, home):
    handle, run_dir = ended_run(home, "old", 40)
    run_cli("prune", "--older-than", "1d", "--keep-last", "0", check=0)
    assert not run_dir.exists()
    listed = json.loads(run_cli("list", "-o", "json", check=0).stdout)
    assert [(j["handle"], j["state"]) for j in listed] == [(handle, "SUCCEEDED")]
    for command in ("status", "logs", "outputs"):
        line = _one_error(run_cli(command, handle))
        assert f"{handle} ended SUCCEEDED and was pruned since" in line, (command, line)
        assert "no local job" not in line and "cloudtrain list still shows" in line, (command, line)


def test_outputs_of_a_running_job_says_it_is_still_running(tmp_path, home):
    handle = run_cli("submit", write_job(tmp_path, SLEEPER), "--detach", check=0).stdout.strip()
    try:
        line = _one_error(run_cli("outputs", handle, "--dest", tmp_path / "out"))
        assert f"{handle} is still RUNNING and has written nothing to CLOUDTRAIN_OUTPUT_DIR yet" in line, line
        assert f"cloudtrain wait {handle}" in line and "cancelled or failed" not in line, line
        # what it wrote so far comes, with a warning that it is not all
        out_dir = json.loads((home / "runs" / handle.split("://")[1] / "plan.json").read_text())["output_dir"]
        (home / "runs" / handle.split("://")[1] / "output").mkdir(exist_ok=True)
        with open(f"{out_dir}/step-1.txt", "w") as f:
            f.write("1\n")
        proc = run_cli("outputs", handle, "--dest", tmp_path / "some", check=0)
        assert (tmp_path / "some" / "step-1.txt").read_text() == "1\n"
        assert f"warning: {handle} is still RUNNING: downloading what it wrote so far" in proc.stderr, proc.stderr
    finally:
        run_cli("cancel", handle, check=0)


@pytest.mark.parametrize("name,text", [
    ("train.py", "import os\nprint('rank', os.environ['RANK'])\n"),
    ("run.sh", "#!/bin/sh\npython train.py\n"),
    ("notes.txt", "a: b: c\n"),
])
def test_a_script_given_as_the_job_file_is_named_as_such(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    for command in ("submit", "validate", "render"):
        line = _one_error(run_cli(command, path, env={"CLOUDTRAIN_HOME": str(tmp_path / "state")}))
        assert f"{path}: " in line and "not a job file" in line and f"-j 1x1 --script {path}" in line, line
        assert "YAML:" in line and "mapping values" not in line, line
    assert not (tmp_path / "state" / "runs").exists()


@pytest.mark.parametrize("value", ["null", "~", "''", "[]", "3"])
def test_a_secret_set_to_null_or_a_scalar_reads_plainly(tmp_path, value):
    path = write_job(tmp_path, "name: s\ncommand: [python, train.py]\n")
    line = _one_error(run_cli("validate", "-p", "local", path, "--set", f"secrets.HF_TOKEN={value}"))
    assert "--set secrets.HF_TOKEN" in line and "from_env" in line and "from_file" in line, line
    assert "SecretRef" not in line and "model_type" not in line and "class" not in line.lower(), line


def test_the_docker_error_says_how_to_start_docker_not_a_repository_script(tmp_path, monkeypatch):
    from cloudtrain.spec.errors import PlatformError
    from cloudtrain_docker.provider import DockerProvider
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(PlatformError) as caught:
        assert DockerProvider().client is None  # (raises first)
    message = str(caught.value)
    assert message.startswith("cannot reach the Docker engine (")
    assert "scripts/" not in message and "start-dockerd" not in message
    assert "sudo systemctl start docker" in message and "Docker Desktop" in message and "DOCKER_HOST" in message


def test_resources_takes_several_providers_as_list_does(tmp_path):
    both = json.loads(run_cli("resources", "-p", "eks,azure", "-o", "json", check=0).stdout)
    eks = json.loads(run_cli("resources", "-p", "eks", "-o", "json", check=0).stdout)
    azure = json.loads(run_cli("resources", "-p", "azure", "-o", "json", check=0).stdout)
    assert eks and azure
    assert sorted(json.dumps(r, sort_keys=True) for r in both) == \
        sorted(json.dumps(r, sort_keys=True) for r in eks + azure)
    line = _one_error(run_cli("resources", "-p", "eks,nosuch"))
    assert "nosuch" in line, line


HELD = """
import signal, time
from cloudtrain.commands.cli import Interrupts
signal.signal(signal.SIGHUP, signal.SIG_IGN if NOHUP else signal.SIG_DFL)
held = Interrupts()
if not NOHUP:
    signal.raise_signal(signal.SIGHUP)
    time.sleep(0)
print(held.pending, signal.getsignal(signal.SIGHUP) is signal.SIG_IGN)
"""


@pytest.mark.parametrize("nohup,expected", [(False, f"{int(signal.SIGHUP)} False"), (True, "None True")])
def test_sighup_is_held_as_the_other_signals_are_but_not_under_nohup(nohup, expected):
    """SIGHUP (the terminal closed) is one of the signals a followed submit turns into a cancel,
    as Ctrl-C (the whole run: tests/e2e/test_local_lifecycle.py); under nohup it stays ignored.
    (In a child process: without the handler SIGHUP ends the process it reaches.)"""
    proc = subprocess.run([sys.executable, "-c", f"NOHUP = {nohup}" + HELD], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.strip() == expected
