"""cloudtrain.testing, the contract suite in the package: importing it costs no pytest and no
provider; a third-party provider runs it from anywhere with ``pytest --pyargs cloudtrain.testing``
and gets the contract over its provider alone; without a double it fails the lifecycle contract,
saying how to hand one in."""
import json
import os
import subprocess
import sys

from cloudtrain.extend.registry import builtin_providers
from conftest import ROOT, SUPPORT, run_cli


def outside_the_repository(tmp_path, *args, **env):
    """pytest in a directory of its own (no repository settings), as a plugin's own checkout runs it,
    with the test plugin ct_fakeone installed (on the path, named by CLOUDTRAIN_PLUGINS)."""
    environ = dict(os.environ, CLOUDTRAIN_PLUGINS="ct_fakeone.plugin", **env)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT), environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300)


def test_importing_the_package_imports_no_pytest_and_no_provider():
    code = ("import sys, cloudtrain, cloudtrain.testing; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest') "
            "or m.startswith('cloudtrain_')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_built_in_providers_are_those_of_cloudtrains_entry_points():
    rows = json.loads(run_cli("providers", "-o", "json", check=0).stdout)
    assert builtin_providers() == sorted(r["provider"] for r in rows if r["plugin"] != "ct_fakeone.plugin")


def test_the_package_is_in_the_wheel():
    from setuptools import find_packages
    assert "cloudtrain.testing" in find_packages(str(ROOT / "core"))


def test_a_third_party_provider_runs_the_contract_over_itself_alone(tmp_path):
    proc = outside_the_repository(tmp_path, "-p", "cloudtrain.testing.plugin", "--pyargs", "cloudtrain.testing",
                                  "--cloudtrain-provider", "fakeone", "-k", "render or required or storage", "-rA")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = [line for line in proc.stdout.splitlines() if line.startswith("PASSED ")]
    assert ran and all("[fakeone" in line for line in ran), ran


def test_without_a_double_the_lifecycle_contract_fails_saying_how_to_hand_one(tmp_path):
    proc = outside_the_repository(tmp_path, "--pyargs", "cloudtrain.testing", "-k", "lifecycle",
                                  CLOUDTRAIN_TEST_PROVIDERS="fakeone")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "fakeone has no double for the lifecycle contract" in proc.stdout
    assert "@cloudtrain.testing.double('fakeone')" in proc.stdout
