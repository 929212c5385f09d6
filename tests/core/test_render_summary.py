"""``render`` shows the platform's request first and the files shipped to the nodes (the launcher's
source in a ConfigMap) as their size and sha256 (issue 44, item 7: kubeflow's PyTorchJob started
at line 2,792 of 3,045); ``--full``, ``-o yaml`` and ``-o json`` stay complete, byte for byte."""
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from conftest import run_cli

JOB = Path(__file__).resolve().parents[2] / "examples" / "digits-ddp" / "job.yaml"
WORKLOADS = {"kubeflow": "PyTorchJob", "volcano": "Job", "eks": "PyTorchJob", "modelarts-lite": "Job"}


def _docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("provider", sorted(WORKLOADS))
def test_the_request_comes_first_and_the_launcher_is_summarized(provider):
    shown = run_cli("render", "-p", provider, JOB, check=0).stdout
    full = run_cli("render", "-p", provider, JOB, "-o", "yaml", check=0).stdout
    docs, whole = _docs(shown), _docs(full)
    kinds = [d["kind"] for d in docs]
    workload = kinds.index(WORKLOADS[provider])
    launcher = next(i for i, d in enumerate(docs) if d["metadata"]["name"].endswith("-launcher"))
    assert workload < launcher == len(docs) - 1, kinds  # the request before the shipped files
    assert shown.count("\n") * 5 < full.count("\n"), (shown.count("\n"), full.count("\n"))
    # every shipped file is there, as its size and the sha256 of what -o yaml ships
    files = next(d for d in whole if d["metadata"]["name"].endswith("-launcher"))["data"]
    summary = docs[launcher]["data"]
    assert sorted(summary) == sorted(files) and len(files) > 10
    for name, text in files.items():
        data = text.encode()
        assert summary[name] == f"{len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}", name
    assert f"# {len(files)} files shipped to every node (the launcher)" in shown and "--full" in shown
    # nothing but the shipped files differs
    rest = [d for d in docs if not d["metadata"]["name"].endswith("-launcher")]
    assert rest == [d for d in whole if not d["metadata"]["name"].endswith("-launcher")]


def test_full_yaml_and_json_stay_complete():
    full = run_cli("render", "-p", "kubeflow", JOB, "--full", check=0).stdout
    assert full == run_cli("render", "-p", "kubeflow", JOB, "-o", "yaml", check=0).stdout
    main = (Path(__file__).resolve().parents[2] / "core" / "cloudtrain" / "launch" / "main.py").read_text()
    assert any(d.get("data", {}).get("cloudtrain.launch.main.py") == main for d in _docs(full))
    envelope = json.loads(run_cli("render", "-p", "kubeflow", JOB, "-o", "json", check=0).stdout)
    assert any(a["content"].get("data", {}).get("cloudtrain.launch.main.py") == main for a in envelope["artifacts"])
    dry = run_cli("submit", "-p", "kubeflow", JOB, "--dry-run", check=0).stdout
    assert "cloudtrain.launch.main.py: " in dry and "def main" not in dry


def test_a_render_without_shipped_files_is_as_before():
    for provider in ("local", "slurm"):
        assert run_cli("render", "-p", provider, JOB, check=0).stdout == \
            run_cli("render", "-p", provider, JOB, "-o", "yaml", check=0).stdout
