"""A user coming from SkyPilot or TorchX (issue 44, item 3): their command words and job-file words
get a pointer to cloudtrain's, naming the field and its line, exit 2, and nothing is started."""
import os

import pytest

from conftest import run_cli, write_job

JOB = "name: habit\ncommand: [python, train.py]\n"


def _nothing_started(home_env):
    """No run directory and no kept request under $CLOUDTRAIN_HOME (a started job has both)."""
    home = home_env["CLOUDTRAIN_HOME"]
    found = [os.path.join(d, f) for d, _, files in os.walk(home) for f in files]
    assert not [f for f in found if os.sep + "runs" + os.sep in f or os.sep + "requests" + os.sep in f], found


@pytest.fixture
def state(tmp_path):
    return {"CLOUDTRAIN_HOME": str(tmp_path / "state")}


@pytest.mark.parametrize("words,expected", [
    (["run", "JOB"], "unknown command 'run'; did you mean `cloudtrain submit JOB`?"),
    (["exec", "JOB"], "exec runs a command inside a running job's node and takes the job's handle (PROVIDER://ID); "
                      "did you mean `cloudtrain submit JOB`?"),
    (["check"], "unknown command 'check'; did you mean `cloudtrain doctor`?"),
    (["jobs"], "unknown command 'jobs'; did you mean `cloudtrain list`?"),
    (["queue"], "unknown command 'queue'; did you mean `cloudtrain list`?"),
    (["describe", "local://x"], "unknown command 'describe'; did you mean `cloudtrain status local://x`?"),
    (["launch", "JOB"], "'cloudtrain launch' runs inside a node and takes the node's command; "
                        "did you mean `cloudtrain submit JOB`?"),
    (["status"], "status needs a job's handle (PROVIDER://ID, as submit printed it); `cloudtrain list` shows "
                 "the recent jobs and their handles"),
    (["status", "-o", "json"], "status needs a job's handle"),
])
def test_another_tools_command_is_pointed_at_cloudtrains(tmp_path, state, words, expected):
    job = write_job(tmp_path, JOB)
    words = [str(job) if w == "JOB" else w for w in words]
    proc = run_cli(*words, env=state, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("cloudtrain: error: " + expected.replace("JOB", str(job))), proc.stderr
    _nothing_started(state)


def test_launch_on_a_node_still_runs_the_launcher(tmp_path):
    """On a node (its environment names the detectors) ``launch`` is the launcher, yaml or not:
    ``--print`` shows the command it would run."""
    env = {"CLOUDTRAIN_NUM_NODES": "1", "CLOUDTRAIN_NODE_RANK": "0", "CLOUDTRAIN_DISTRIBUTION": "none"}
    proc = run_cli("launch", "--print", "--", "echo", "config.yaml", env=env, cwd=tmp_path)
    assert "did you mean" not in proc.stderr
    assert "config.yaml" in proc.stdout, proc.stderr


@pytest.mark.parametrize("lines,line,field,expected", [
    ("num_nodes: 2\n", 3, "num_nodes", "unknown field; did you mean 'distribution.nodes'?"),
    ("distribution:\n  num_nodes: 2\n", 4, "distribution.num_nodes",
     "unknown field; did you mean 'distribution.nodes'?"),
    ("run: python train.py\n", 3, "run", "unknown field; did you mean 'command'?"),
    ("workdir: .\n", 3, "workdir", "unknown field; did you mean 'code'?"),
    ("envs: {A: b}\n", 3, "envs", "unknown field; did you mean 'env'?"),
    ("resources:\n  accelerators: A100:8\n", 4, "resources.accelerators",
     "unknown field; write the accelerator and the count apart: resources.accelerator: A100 and "
     "resources.gpus_per_node: 8"),
    ("accelerators: H100:4\n", 3, "accelerators",
     "unknown field; write the accelerator and the count apart: resources.accelerator: H100 and "
     "resources.gpus_per_node: 4"),
    ("distribution:\n  setup: pip install x\n", 4, "distribution.setup",
     "unknown field; did you mean the top-level 'setup'?"),
    ("resources:\n  cloud: aws\n", 4, "resources.cloud",
     "unknown field; the platform is not a job field: name it on the command line (cloudtrain submit -p PROVIDER"),
    ("cloud: aws\n", 3, "cloud", "unknown field; the platform is not a job field"),
])
def test_another_tools_field_names_cloudtrains_at_its_line(tmp_path, state, lines, line, field, expected):
    job = write_job(tmp_path, JOB + lines)
    for command in (["validate", job], ["submit", "-p", "local", job]):
        proc = run_cli(*command, env=state, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert f"cloudtrain: error: {job}:{line}: {field}: {expected}" in proc.stderr, proc.stderr
        assert "distribution.min_nodes" not in proc.stderr
    _nothing_started(state)
