import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = Path(__file__).resolve().parent / "support"
EXAMPLES = ROOT / "examples"
# The test plugin (tests/support/ct_fakeone/) is loaded by every plugin manager the tests make.
os.environ["CLOUDTRAIN_PLUGINS"] = "ct_fakeone.plugin"
# No settings of whoever runs the tests (docs/configuration.md): a test that wants a user config
# writes one and points CLOUDTRAIN_CONFIG at it.
os.environ["CLOUDTRAIN_CONFIG"] = str(ROOT / "tests" / "data" / "no-user-config.yaml")
for _var in ("CLOUDTRAIN_PROFILE", "CLOUDTRAIN_PROVIDER"):
    os.environ.pop(_var, None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With pytest-xdist (``-n 2``, scripts/test.sh): a test file goes to one worker whole, so its
    module fixtures (a double's server, a shared training) are made once and its tests, which may
    share names (a job's name, a container's label), never run beside each other; tests marked
    ``xdist_group(name)`` (``--dist loadgroup``) go to one worker as one unit across files."""
    from xdist.scheduler import LoadScopeScheduling

    class FileOrGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if "@" in nodeid:  # loadgroup's "path::test[params]@group"
                return nodeid.rsplit("@", 1)[-1]
            return nodeid.split("::", 1)[0]

    return FileOrGroupScheduling(config, log)


@pytest.fixture(scope="module")
def aws_server():
    """One loopback AWS (``doubles.aws_double``: moto's server and EC2's node emulation) per test
    module; a test takes ``aws_server.fresh(monkeypatch, BUCKET)``: its own account's clean state."""
    from doubles.aws_double import AwsDouble
    with AwsDouble() as aws:
        yield aws


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private CLOUDTRAIN_HOME for the test and the processes it starts; a job the test left
    running (it failed or timed out) is cancelled afterwards, so nothing outlives the test."""
    path = tmp_path / "ct-home"
    monkeypatch.setenv("CLOUDTRAIN_HOME", str(path))
    yield path
    if (path / "state.db").exists():
        from cloudtrain.extend.plugins import get_provider
        from cloudtrain.spec.states import TERMINAL
        from cloudtrain.runtime.store import Store
        for row in Store(path / "state.db").list_jobs():
            if row["state"] not in TERMINAL:
                get_provider(row["provider"]).cancel(row["id"])


def cli_env(extra=None, plugins=True):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT.parent), str(SUPPORT), env.get("PYTHONPATH")]))
    if plugins:
        env["CLOUDTRAIN_PLUGINS"] = "ct_fakeone.plugin"
    env.pop("PYTHONUNBUFFERED", None)
    env.update(extra or {})
    return env


def run_cli(*args, env=None, cwd=None, timeout=300, check=None):
    """Run ``cloudtrain ARGS`` in a subprocess; returns CompletedProcess with text output."""
    proc = subprocess.run([sys.executable, "-m", "cloudtrain", *map(str, args)], capture_output=True, text=True,
                          env=cli_env(env), cwd=cwd, timeout=timeout)
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def write_job(directory: Path, text: str, name: str = "job.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path
