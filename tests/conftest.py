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
# DeepSpeed on the CPU compiles a C++ op (deepspeed_shm_comm, torch's JIT extension, ninja) at
# init_distributed in the first job of a fresh venv: about a minute of one core. torch builds with
# $CXX; Debian's ccache (scripts/test.sh) makes every compile after the first one on this machine
# a cache hit on the preprocessed source, whatever the files' times in the new venv.
if os.path.exists("/usr/lib/ccache/c++") and "CXX" not in os.environ:
    os.environ["CXX"] = "/usr/lib/ccache/c++"


DURATIONS = Path(__file__).with_name("durations.json")


def _file_weights() -> dict:
    """Seconds each test file took in a recent full run (``tests/durations.json``, written by
    ``scripts/test-durations.py`` from a run's JUnit XML); {} when there is none."""
    import json
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def _scope_of(item) -> str:
    group = item.get_closest_marker("xdist_group")
    if group:
        return "@" + (group.args[0] if group.args else group.kwargs.get("name", "default"))
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """The longest units of work first (a file, or an ``xdist_group`` across files), by the times
    of a recent run: with two workers, the run then ends with short files on both, instead of
    one worker idle while the other runs a long e2e file picked last.  Stable, so a file's tests
    keep their order; a file the times do not know weighs as much as the median file."""
    weights = _file_weights()
    if not weights:
        return
    default = sorted(weights.values())[len(weights) // 2]
    scope_weight: dict = {}
    seen: set = set()
    for item in items:
        scope, path = _scope_of(item), item.nodeid.split("::", 1)[0]
        if (scope, path) not in seen:
            seen.add((scope, path))
            scope_weight[scope] = scope_weight.get(scope, 0.0) + weights.get(path, default)
    items.sort(key=lambda item: -scope_weight[_scope_of(item)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With pytest-xdist (``-n 2``, scripts/test.sh): a test file goes to one worker whole, so its
    module fixtures (a double's server, a shared training) are made once and its tests, which may
    share names (a job's name, a container's label), never run beside each other; tests marked
    ``xdist_group(name)`` (``--dist loadgroup``) go to one worker as one unit across files.
    Units go out in collection order (longest first: ``pytest_collection_modifyitems``), and a
    worker gets its next unit only when it is on its last test, so no unit waits behind another
    worker's long file while a worker is idle."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # xdist's own order is by the number of tests

    class FileOrGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if "@" in nodeid:  # loadgroup's "path::test[params]@group"
                return nodeid.rsplit("@", 1)[-1]
            return nodeid.split("::", 1)[0]

        def _reschedule(self, node) -> None:
            # xdist's own tops a worker up at <= 2 tests pending; a worker holds its last test
            # until it knows the next one (pytest's nextitem), so 1 is the least that keeps it busy
            if self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work[node]) > 1:
                return
            super()._reschedule(node)

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
