"""The neutral states and the exit codes live once, in standard-library-only modules that the
supervisors, the state store and the node launcher (shipped without cloudtrain installed) import."""
import subprocess
import sys

from conftest import cli_env

from cloudtrain.launch import exitcodes
from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.launch.bundle import write_bundle
from cloudtrain.spec.states import TERMINAL, State
from cloudtrain.runtime.store import Store


def test_the_modules_that_run_without_pydantic_import_none():
    modules = ["cloudtrain.spec.states", "cloudtrain.launch.exitcodes", "cloudtrain.runtime.supervise",
               "cloudtrain.runtime.store", "cloudtrain.launch.main", "cloudtrain_local.supervisor"]
    code = "import importlib, sys\nfor m in %r: importlib.import_module(m)\nprint(sorted(" \
           "{m.split('.')[0] for m in sys.modules} & {'pydantic', 'yaml', 'pluggy'}))" % (modules,)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_every_module_of_a_bundle_imports_from_the_bundle_alone(tmp_path):
    """The launcher imports ``cloudtrain.launch.exitcodes``; a bundle without it fails on the node.
    AWS ships its node module (``cloudtrain_aws.common.NODE_MODULE``) in the bundle too."""
    from cloudtrain.launch import platform as platforms
    bundle = write_bundle(tmp_path / "b", [platforms.find("sagemaker"), "cloudtrain_aws.node:main"])
    modules = sorted(".".join(p.relative_to(bundle).with_suffix("").parts).replace(".__init__", "")
                     for p in bundle.rglob("*.py") if p.name != "__main__.py")
    assert "cloudtrain.launch.exitcodes" in modules and "cloudtrain_aws.node" in modules
    code = "import importlib\nfor m in %r: importlib.import_module(m)\nprint('ok')" % (modules,)
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(bundle)})
    assert proc.stdout.strip() == "ok", proc.stderr


def test_exit_codes_are_the_documented_ones():
    """docs/cli.md#exit-codes: 0 ok, 1 job failed, 2 bad input, 3 platform, 130 cancelled,
    141 a closed pipe; a signal N is 128 + N as a shell reports it."""
    assert ((exitcodes.EXIT_OK, exitcodes.EXIT_JOB_FAILED, exitcodes.EXIT_BAD_INPUT, exitcodes.EXIT_PLATFORM)
            == (0, 1, 2, 3))
    assert (exitcodes.EXIT_INTERRUPTED, exitcodes.EXIT_KILLED, exitcodes.EXIT_BROKEN_PIPE) == (130, 137, 141)
    assert BadInput("x").exit_code == 2 and PlatformError("x").exit_code == 3
    assert [State(s).exit_code for s in TERMINAL] == [0, 1, 130]
    assert State.RUNNING.exit_code is None and not State.RUNNING.terminal


def test_the_store_finishes_a_job_once(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_job(id="j", provider="local", name="n", nodes=1, run_dir=str(tmp_path), state=State.PENDING.value)
    assert store.finish_job("j", State.FAILED.value, exit_code=exitcodes.EXIT_JOB_FAILED)
    for state in TERMINAL:
        assert not store.finish_job("j", state)
    assert store.get_job("j")["state"] == "FAILED"
