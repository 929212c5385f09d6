"""A string ``command`` with shell syntax (issue 44, item 1): SkyPilot's ``run: |`` is bash, but a
cloudtrain string command is only split into words, never run by a shell. Such a command used to
run wrong and SUCCEED (two lines ran as one ``echo``, ``$VAR`` printed its name, ``| tee`` became
arguments); now validate, render and submit refuse it at its line, with the list form and an
explicit ``[bash, -c, ...]`` to use instead, and nothing is started."""
import json
import os

import pytest
import yaml

from conftest import run_cli, write_job
from cloudtrain.spec.shellwords import shell_syntax

# the three cases of the issue, each as a user from SkyPilot writes it (line 3 is `command`)
CASES = {
    "two-lines": ("command: |\n  echo one\n  echo two\n", "several lines"),
    "variable": ("command: echo $CLOUDTRAIN_OUTPUT_DIR\n", "a $"),
    "pipe": ("command: python train.py | tee log.txt\n", "a pipe"),
}


def _job(tmp_path, command: str):
    return write_job(tmp_path, "name: shelly\ncode: .\n" + command + "distribution: {type: none}\n")


def _state(tmp_path):
    return {"CLOUDTRAIN_HOME": str(tmp_path / "state")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_render_and_submit_refuse_it_at_its_line(tmp_path, case):
    text, construct = CASES[case]
    path = _job(tmp_path, text)
    for words in (["validate"], ["render"], ["submit", "--detach"]):
        proc = run_cli(*words, "-p", "local", path, env=_state(tmp_path))
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"cloudtrain: error: {path}:3: command: has {construct}"), proc.stderr
        # the two forms that say what to run
        assert "command: [python, train.py" in proc.stderr and '["bash", "-c", ' in proc.stderr, proc.stderr
        assert proc.stdout == ""
    assert not os.path.exists(tmp_path / "state" / "runs")


def test_the_suggested_bash_form_is_accepted_and_says_the_whole_script(tmp_path):
    path = _job(tmp_path, CASES["two-lines"][0])
    proc = run_cli("validate", "-p", "local", path)
    suggested = proc.stderr.split("ask for a shell explicitly: command: ", 1)[1].strip()
    assert json.loads(suggested) == ["bash", "-c", "echo one\necho two"]
    fixed = _job(tmp_path, f"command: {suggested}\n")
    run_cli("validate", "-p", "local", fixed, check=0)


def test_a_plain_string_command_is_still_accepted_and_split(tmp_path):
    path = _job(tmp_path, "command: python train.py --lr 0.1 --name 'run one' --tag \"a;b\" --files '*.csv'\n")
    proc = run_cli("render", "-p", "local", "-o", "yaml", path)
    assert proc.returncode == 0, proc.stderr
    argv = yaml.safe_load_all(proc.stdout).__next__()["argv"]
    assert argv[argv.index("--") + 1:] == ["python", "train.py", "--lr", "0.1", "--name", "run one", "--tag", "a;b",
                                           "--files", "*.csv"]


def test_validate_reports_it_with_the_other_problems_at_once(tmp_path):
    path = write_job(tmp_path, "name: Bad_Name\ncommand: python train.py > log.txt\nspot: maybe\n")
    proc = run_cli("validate", "-p", "local", path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(f"{path}:1: name" in line for line in lines), proc.stderr
    assert any(f"{path}:2: command: has a redirection" in line for line in lines), proc.stderr
    assert any(f"{path}:3: spot" in line for line in lines), proc.stderr


def test_the_refusal_never_echoes_a_credential_it_holds(tmp_path):
    token = "hf_" + "Ab3" * 12
    command = f"git clone https://me:pAssW0rd99@git.example.com/r && python r/t.py --token {token}"
    path = _job(tmp_path, f"command: {command}\n")
    proc = run_cli("validate", "-p", "local", path)
    assert proc.returncode == 2 and "command: has an &&" in proc.stderr, proc.stderr
    assert "pAssW0rd99" not in proc.stderr and token not in proc.stderr, proc.stderr


def test_a_set_command_is_refused_at_its_set(tmp_path):
    path = write_job(tmp_path, "name: ok\ncommand: python train.py\n")
    proc = run_cli("validate", "-p", "local", path, "--set", "command=python a.py && python b.py")
    assert proc.returncode == 2 and "--set command=" in proc.stderr and "command: has an &&" in proc.stderr, \
        proc.stderr


@pytest.mark.parametrize("command,construct", [
    ("python train.py; python eval.py", "a ';'"),
    ("python train.py && python eval.py", "an &&"),
    ("python train.py 2>err.txt", "a redirection (>)"),
    ("python train.py --out \"$HOME/x\"", "a $"),
    ("python train.py --at `date`", "a command substitution"),
    ("python train.py --data data/*.csv", "a glob"),
    ("python train.py --data ~/data", "a ~"),
    ("python train.py # the best run", "a # comment"),
    ("OMP_NUM_THREADS=4 python train.py", "a variable assignment"),
    ("python train.py --seed {1,2}", "a brace expansion"),
    ("python train.py \\\n  --lr 0.1", "several lines"),
    ("(cd src && python train.py)", "a subshell"),
])
def test_what_a_shell_would_read_differently_is_found(command, construct):
    found = shell_syntax(command)
    assert found is not None and found.startswith(construct), (command, found)


@pytest.mark.parametrize("command", [
    "python train.py --lr 0.1",
    "python train.py --name 'a b; c | d > e $F'",   # quoted: a shell passes it as it is too
    "python train.py --tag \"x; y\" --cfg 'model.layers=[64,128]'",
    "python train.py --tag a\\;b",                   # escaped
    "python train.py --data ${{inputs.digits}} --out ${{outputs.model}}",  # Azure ML's bindings
    "python train.py --lr=1e-3 --name=run#1 --home=a~b",
    "python train.py\n",                             # a one-line `command: |` ends with a newline
])
def test_what_a_shell_reads_the_same_is_accepted(command):
    assert shell_syntax(command) is None
