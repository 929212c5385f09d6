"""The job's ``setup:``: loaded, refused when empty, and carried to every provider's nodes as one
``cloudtrain launch --setup=...`` argument that no shell expands (real runs: tests/e2e/test_setup.py)."""
import base64
import gzip
import io
import json
import shlex
import subprocess
import sys

import pytest

from cloudtrain.extend import plugins
from cloudtrain.spec.errors import JobFileError
from cloudtrain.launch import setup as node_setup
from cloudtrain.input.loading import job_from_dict, load_job
from conftest import EXAMPLES, write_job

PROVIDERS = sorted(set(plugins.providers()) - {"fakeone"})  # fakeone (tests/support) starts no launcher
# a quote, a $ and a ; : each must reach sh -c exactly as written
SETUP = """pip install -r "it's.txt"; echo $HOME > /tmp/x"""


def job_with_setup(**extra):
    data = {"name": "setup-job", "command": "python train.py", "image": "example/train:1",
            "code": str(EXAMPLES / "digits-ddp"), "setup": SETUP,
            "distribution": {"type": "ddp", "nodes": 3, "procs_per_node": 2}}
    data.update(extra)
    return job_from_dict(data)


def _texts(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _texts(v)
    elif isinstance(value, str):
        yield value
        try:  # a user-data script may travel base64'd, gzip'd or not
            raw = base64.b64decode(value, validate=True)
            yield gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
        except Exception:
            pass


def carries_setup(text: str, depth: int = 0) -> bool:
    """``text`` holds ``--setup=SETUP`` as one word, or a shell line that does (nested once or twice)."""
    if text == "--setup=" + SETUP:
        return True
    if depth > 3 or "--setup=" not in text:
        return False
    for line in [text, *text.splitlines()]:
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if any(w == "--setup=" + SETUP or carries_setup(w, depth + 1) for w in words if "--setup=" in w):
            return True
    return False


@pytest.fixture(autouse=True)
def small_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("name", PROVIDERS)
def test_every_provider_renders_the_setup_as_one_launcher_argument(name):
    rendered = plugins.get_provider(name).render(job_with_setup())
    content = json.loads(rendered.to_json())
    assert any(carries_setup(t) for t in _texts(content)), f"{name} does not carry setup:\n{rendered.to_json()[:3000]}"


def test_without_setup_nothing_is_added():
    assert not any("--setup" in a for a in job_with_setup(setup=None).launch_args())


def test_setup_loads_from_the_job_file_and_an_empty_one_is_refused(tmp_path):
    job = load_job(write_job(tmp_path, "name: s\ncommand: python t.py\nsetup: pip install -r requirements.txt\n"))
    assert job.setup == "pip install -r requirements.txt"
    with pytest.raises(JobFileError, match=r"job.yaml:3: setup: "):
        load_job(write_job(tmp_path / "empty", "name: s\ncommand: python t.py\nsetup: ''\n"))


def test_the_launcher_runs_setup_through_sh_once_and_stops_on_its_failure(tmp_path):
    out = io.StringIO()
    assert node_setup.run_setup("echo \"it's $WHO\" > made.txt && echo done", {"WHO": "me", "PATH": "/usr/bin:/bin"},
                                out=out) is None
    assert "done" in out.getvalue()
    failed = node_setup.run_setup("echo first; echo 'pip: no such package' >&2; exit 4", {"PATH": "/usr/bin:/bin"},
                                  out=io.StringIO())
    assert failed.startswith("setup exited with code 4") and "pip: no such package" in failed


def test_cloudtrain_launch_fails_the_node_before_the_command_when_setup_fails(tmp_path):
    marker = tmp_path / "ran"
    proc = subprocess.run([sys.executable, "-m", "cloudtrain.launch", "--type", "none",
                           "--setup=echo broken >&2; exit 5", "--", "touch", str(marker)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path),
                               "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path / "out")})
    assert proc.returncode == 1, proc.stderr
    assert "setup exited with code 5: broken" in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["mpi", "horovod", "ray"])
def test_azure_carries_setup_where_azure_ml_starts_the_ranks_itself(kind):
    """mpi/horovod: every rank's ``cloudtrain.launch.mpirank --setup=...`` (once per node: its local
    rank 0 runs it; real run: tests/e2e/test_azure_mpi_setup.py); ray: ``cloudtrain launch``."""
    job = job_with_setup(distribution={"type": kind, "nodes": 2, "procs_per_node": 2})
    command = plugins.get_provider("azure").render(job).artifacts[0].content["command"]
    assert carries_setup(command)
    shim = "cloudtrain.launch.mpirank" if kind != "ray" else "cloudtrain.launch"
    argv = shlex.split(command[command.index(" python3 -m "):])
    assert argv[:3] == ["python3", "-m", shim] and "--setup=" + SETUP in argv[:argv.index("--")]
