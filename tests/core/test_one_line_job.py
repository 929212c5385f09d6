"""A job without a file, TorchX's habit (issue 44, item 3): ``-j NODESxPROCS --script FILE -- ARGS``
makes the JobSpec the job file would, and render, validate and submit read it the same way."""
import json

import pytest

from conftest import run_cli, write_job

FILE = """
name: train
code: .
command: [python, train.py, --epochs, '3', --name, run one]
image: python:3.11-slim
distribution: {type: ddp, nodes: 2, procs_per_node: 3}
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text("print('trained')\n")
    return tmp_path


def _envelope(proc):
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    return data["job"], [a["content"] for a in data["artifacts"]]


@pytest.mark.parametrize("provider", ["local", "kubeflow"])
def test_the_one_line_renders_what_the_same_job_file_does(project, provider):
    by_file = write_job(project, FILE)  # (in the code directory: both ship the same files)
    one_line = run_cli("render", "-p", provider, "-o", "json", "-j", "2x3", "--script", "train.py",
                       "--set", "image=python:3.11-slim", "--", "--epochs", "3", "--name", "run one", cwd=project)
    from_file = run_cli("render", "-p", provider, "-o", "json", by_file, cwd=project)
    name, artifacts = _envelope(one_line)
    assert name == "train"
    assert artifacts == _envelope(from_file)[1]


def test_validate_and_set_take_it_too(project):
    proc = run_cli("validate", "-p", "local", "-j", "4", "--script", "train.py", "--set", "max_restarts=2",
                   cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "-j 4 --script train.py: ok (local: ddp, 1 node(s) x 4 process(es))\n"
    proc = run_cli("validate", "-p", "local", "-j", "2x1", "--script", "train.py", "--set", "spot=maybe",
                   cwd=project)
    assert proc.returncode == 2 and "--set spot=maybe" in proc.stderr, proc.stderr


def test_the_name_comes_from_the_script(project):
    (project / "My_Train.v2.py").write_text("print(1)\n")
    proc = run_cli("render", "-p", "local", "-o", "json", "-j", "1x1", "--script", "My_Train.v2.py", cwd=project)
    assert _envelope(proc)[0] == "my-train-v2"


@pytest.mark.parametrize("words,expected", [
    (["-j", "2y2", "--script", "train.py"], "-j '2y2': write -j NODESxPROCS, e.g. -j 2x4"),
    (["-j", "0x2", "--script", "train.py"], "nodes and processes are 1 or more"),
    (["-j", "2x2"], "-j 2x2 needs the script every process runs: --script train.py"),
    (["-j", "2x2", "--script", "nope.py"], "--script nope.py: no such file here"),
    (["JOB", "-j", "2x2", "--script", "train.py"], "and -j/--script: give one of them"),
    (["JOB", "--", "--lr", "1"], "the words after -- are a script's arguments"),
    ([], "needs a job file (cloudtrain submit job.yaml), or a job without one: cloudtrain submit -j 2x4 --script"),
])
def test_a_wrong_one_line_says_how_to_write_it_and_starts_nothing(project, words, expected):
    job = write_job(project / "spec", FILE)
    words = [str(job) if w == "JOB" else w for w in words]
    proc = run_cli("submit", "-p", "local", *words, cwd=project, env={"CLOUDTRAIN_HOME": str(project / "state")})
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (project / "state" / "runs").exists()
