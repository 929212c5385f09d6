"""What a new user meets first: ``cloudtrain`` from a venv that is not activated, a pipe that
closes early, a job directory that holds ``CLOUDTRAIN_HOME``, the Python API with a path."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, cli_env, run_cli, write_job
from helpers import handle_from, run_dir

pytestmark = pytest.mark.e2e

VENV_BIN = Path(sys.prefix) / "bin"


def bare_env(home: Path, path: str = "/usr/bin:/bin") -> dict:
    """A shell as on a fresh machine: no venv activated, its bin not on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED")}
    env.update(PATH=path, CLOUDTRAIN_HOME=str(home), CLOUDTRAIN_PLUGINS="")
    return env


def test_the_venv_under_test_is_not_on_path_of_the_bare_shell():
    """The premise of the tests below: in the bare shell, `python` does not find torch."""
    probe = shutil.which("python3", path="/usr/bin:/bin")
    if probe is None:
        return  # no python on the bare PATH at all: the premise holds
    out = subprocess.run([probe, "-c", "import torch"], capture_output=True, env=bare_env(Path("/tmp")))
    assert out.returncode != 0, "the system python3 has torch: these tests would prove nothing here"


def test_quickstart_from_a_venv_that_is_not_activated(home):
    """README's Quickstart runs `.venv/bin/cloudtrain submit ...` without activating the venv:
    every node must still find the venv's python, torch and torchrun."""
    proc = subprocess.run([str(VENV_BIN / "cloudtrain"), "submit", str(EXAMPLES / "digits-ddp" / "job.yaml"),
                           "--set", "distribution.nodes=2", "--set", "distribution.procs_per_node=1"],
                          capture_output=True, text=True, env=bare_env(home), timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9


def test_a_command_naming_python_runs_where_path_has_no_python(home, tmp_path):
    """Debian has only python3: `python train.py` runs in the launcher's interpreter when no
    `python` is on the node's PATH (here the node's PATH holds a folder with no interpreter)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    job = write_job(tmp_path / "job", """
        name: nopython
        command: python -c "import sys; print('ran in', sys.executable)"
        distribution: {type: none}
        env: {PATH: "%s"}
    """ % empty)
    proc = run_cli("submit", job, env={"CLOUDTRAIN_HOME": str(home)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ran in {sys.executable}" in proc.stdout


def test_render_shows_the_submitting_interpreters_environment(tmp_path):
    job = write_job(tmp_path, "name: t\ncommand: python train.py\n")
    proc = run_cli("render", "-p", "local", job, "-o", "json", check=0)
    import json
    env = json.loads(proc.stdout)["artifacts"][0]["content"]["env"]
    assert env["PATH"].split(os.pathsep)[0] == str(VENV_BIN)
    assert env["VIRTUAL_ENV"] == sys.prefix


def _submit_piped(job: Path, home: Path):
    """`cloudtrain submit job.yaml | head -1`: read one line, close the pipe."""
    proc = subprocess.Popen([sys.executable, "-m", "cloudtrain", "submit", str(job)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env({"CLOUDTRAIN_HOME": str(home)}))
    first = proc.stdout.readline()
    proc.stdout.close()
    code = proc.wait(timeout=120)
    return first, code, proc.stderr.read().decode()


@pytest.mark.parametrize("outcome, expected", [("0", 0), ("3", 1)])
def test_a_closed_pipe_does_not_hide_the_jobs_outcome(home, tmp_path, outcome, expected):
    """The reader goes away after one line; the job goes on printing and ends later: the exit
    code is still the job's, and only once the job has ended."""
    job = write_job(tmp_path, f"""
        name: piped
        command: python -c "import sys, time; \
[print(i, flush=True) or time.sleep(0.05) for i in range(60)]; sys.exit({outcome})"
        distribution: {{type: none}}
    """)
    first, code, stderr = _submit_piped(job, home)
    assert first
    assert code == expected, stderr
    handle = handle_from(stderr)
    state = run_cli("status", handle, "-o", "json", env={"CLOUDTRAIN_HOME": str(home)}, check=0).stdout
    assert ('"SUCCEEDED"' if expected == 0 else '"FAILED"') in state


def test_cloudtrain_home_inside_the_code_directory(home, tmp_path):
    """`code: .` in a directory that holds CLOUDTRAIN_HOME: the runs are not copied into the
    nodes' copies (that recursed), and the nodes' copies share their files (hard links)."""
    project = tmp_path / "project"
    write_job(project, """
        name: nested
        code: .
        command: python -c "import os; print(sorted(os.listdir('.')))"
        distribution: {type: none, nodes: 2}
    """)
    (project / "data.bin").write_bytes(os.urandom(4096))
    nested_home = project / ".ct-home"
    env = {"CLOUDTRAIN_HOME": str(nested_home)}
    proc = run_cli("submit", project / "job.yaml", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = run_dir(nested_home, handle_from(proc.stderr))
    assert ".ct-home" not in proc.stdout and "data.bin" in proc.stdout
    first, second = (run / f"node-{i}" / "code" / "data.bin" for i in (0, 1))
    assert first.stat().st_ino == second.stat().st_ino
    assert first.stat().st_ino != (project / "data.bin").stat().st_ino  # a copy of the source, not a link to it


def test_python_api_takes_a_path_and_refuses_another_providers_render(tmp_path, home):
    import cloudtrain
    from cloudtrain.spec.errors import BadInput
    job = write_job(tmp_path, "name: api\ncommand: python -c 'print(1)'\ndistribution: {type: none}\n")
    rendered = cloudtrain.render(str(job), provider="local")
    assert rendered.provider == "local" and rendered.job.name == "api"
    assert cloudtrain.render(job, provider="local").job.name == "api"  # a Path too
    with pytest.raises(BadInput, match="rendered for 'local', not 'docker'"):
        cloudtrain.submit(rendered, provider="docker")
    with pytest.raises(BadInput, match="path of a job file"):
        cloudtrain.render(42, provider="local")
    run = cloudtrain.submit(job, provider="local")
    assert run.wait(timeout=120).state.value == "SUCCEEDED"
