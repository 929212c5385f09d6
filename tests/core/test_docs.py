"""The documentation builds, and it keeps up with the code.

- the mkdocs site builds with ``--strict`` (broken links and anchors fail);
- every hook in ``cloudtrain.extend.hookspecs`` has its own heading in docs/plugins.md;
- the job-file reference generated from the JSON Schema is up to date;
- every variable the launcher exports (and every ``CLOUDTRAIN_*`` name it reads) is in
  docs/launcher.md.
"""
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()


def hook_names():
    from cloudtrain.extend import hookspecs
    return sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
                  if name.startswith("cloudtrain_"))


def test_every_hook_has_a_heading_in_plugins_md():
    names = hook_names()
    assert "cloudtrain_register_providers" in names
    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    missing = [name for name in names
               if not re.search(rf"^#{{2,6}}\s+`?{re.escape(name)}`?\s*(\{{[^}}]*\}})?\s*$", text, re.M)]
    assert not missing, f"hooks without a '### {missing[0]}' heading in docs/plugins.md: {missing}"


def test_generated_job_reference_is_up_to_date():
    from conftest import cli_env
    # the installed plugins load (the test plugin with them): docs/resources.md's table reads their catalogs
    proc = subprocess.run([sys.executable, str(DOCS / "gen_job_reference.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, env=cli_env())
    assert proc.returncode == 0, (f"{proc.stdout}{proc.stderr}\n"
                                  "run: python docs/gen_job_reference.py")


def exported_names():
    """Every variable the launcher's plans export, over every distribution type."""
    from cloudtrain.launch import plans
    from cloudtrain.launch.topology import Topology

    names = {"CLOUDTRAIN_ROLE", "CLOUDTRAIN_ROLE_INDEX"}
    for rank in (0, 1, 2):
        topology = Topology(platform="docs", node_rank=rank, num_nodes=3, master_addr="10.0.0.1",
                            hosts=["10.0.0.1", "10.0.0.2", "10.0.0.3"])
        for distribution in plans.DISTRIBUTIONS:
            settings = plans.Settings(distribution=distribution, command=["python", "train.py"],
                                      nproc_per_node=2)
            names.update(plans.common_env(topology, settings))
            names.update(plans.plan(topology, settings, {}).env)
    return sorted(names)


def test_every_exported_variable_is_in_launcher_md():
    text = (DOCS / "launcher.md").read_text(encoding="utf-8")
    names = exported_names()
    assert "CLOUDTRAIN_NODE_RANK" in names and "TF_CONFIG" in names
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"exported by cloudtrain launch but not in docs/launcher.md: {missing}"


def test_every_cloudtrain_variable_the_launcher_mentions_is_in_launcher_md():
    sources = sorted((ROOT / "core" / "cloudtrain" / "launch").glob("*.py"))  # the generic platform too
    names = set()
    for path in sources:
        names.update(re.findall(r"\bCLOUDTRAIN_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    assert "CLOUDTRAIN_PEER_TIMEOUT" in names
    text = (DOCS / "launcher.md").read_text(encoding="utf-8")
    missing = sorted(name for name in names if f"`{name}`" not in text)
    assert not missing, f"read or set by the launcher but not in docs/launcher.md: {missing}"
