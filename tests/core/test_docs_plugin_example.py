"""docs/plugins.md's complete example (the fictional Acme Cloud plugin) is true: its files, taken
from the page into a directory of their own, pass the contract suite the way a third party runs it
(``pytest --pyargs cloudtrain.testing``, the plugin loaded through ``CLOUDTRAIN_PLUGINS``, its double
through ``-p acme_tests.double``), and ``cloudtrain render -p acme`` of the page's job file prints
what the page shows."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "plugins.md"
FILE = re.compile(r"^`((?:cloudtrain_acme|acme_tests)/\w+\.py)`:\n\n```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
# the command the page shows for running the suite over the example (its line continuation joined)
SUITE = ("-p", "cloudtrain.testing.plugin", "-p", "acme_tests.double", "--pyargs", "cloudtrain.testing",
         "--cloudtrain-provider", "acme", "-q")


def example() -> str:
    return PAGE.read_text(encoding="utf-8").split("## A complete example", 1)[1]


def extracted(into: Path) -> Path:
    files = FILE.findall(example())
    names = {name for name, _ in files}
    assert {"cloudtrain_acme/provider.py", "cloudtrain_acme/detect.py", "acme_tests/double.py"} <= names, names
    for name, text in files:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_text(text, encoding="utf-8")
    return into


def third_party_env(tmp_path: Path, package: Path) -> dict:
    """A shell with only the example's plugin added: no settings, no cloud credentials, no test plugin."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDTRAIN_", "AWS_", "AZURE_", "KUBE"))}
    env.update(CLOUDTRAIN_PLUGINS="cloudtrain_acme.plugin", CLOUDTRAIN_HOME=str(tmp_path / "home"),
               CLOUDTRAIN_CONFIG=str(tmp_path / "no-config.yaml"), HOME=str(tmp_path / "user"), NO_COLOR="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(package), env.get("PYTHONPATH")])))
    env.pop("PYTHONUNBUFFERED", None)
    (tmp_path / "user").mkdir()
    (tmp_path / "no-config.yaml").write_text("{}\n")
    return env


def test_the_page_shows_the_command_that_runs_the_suite():
    joined = re.sub(r"\\\n\s*", "", example())
    assert "python -m pytest " + " ".join(SUITE) in joined


def test_the_example_passes_the_contract_suite_as_a_third_party_runs_it(tmp_path):
    package = extracted(tmp_path / "cloudtrain-acme")
    run_in = tmp_path / "elsewhere"  # not the repository: none of its pytest settings or doubles
    run_in.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *SUITE, "-rA"], cwd=run_in,
                          env=third_party_env(tmp_path, package), capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    passed = [line for line in proc.stdout.splitlines() if line.startswith("PASSED ")]
    assert all("[acme" in line for line in passed if "[" in line), passed  # over acme alone
    for contract in ("test_detection.py", "test_no_silent_drop.py", "test_lifecycle.py", "test_render.py",
                     "test_cloud_template.py", "test_storage.py"):
        assert any(line.startswith(f"PASSED {contract}::") for line in passed), f"no {contract} ran:\n{proc.stdout}"


def test_render_of_the_pages_job_file_prints_what_the_page_shows(tmp_path):
    text = example()
    job = re.search(r"^for this job file:\n\n```yaml\n(.*?)^```", text, re.MULTILINE | re.DOTALL).group(1)
    shown = re.search(r"^\$ cloudtrain render -p acme job\.yaml\n(.*?)^\$ ", text, re.MULTILINE | re.DOTALL).group(1)
    package = extracted(tmp_path / "cloudtrain-acme")
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "job.yaml").write_text(job, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "cloudtrain", "render", "-p", "acme", "job.yaml"],
                          cwd=tmp_path / "job", env=third_party_env(tmp_path, package), capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown
