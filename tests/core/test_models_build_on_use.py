"""The job's and the plugins' pydantic models build their validators on first use, not at import:
a command that renders for one provider builds that provider's options model alone (issue 38)."""
import json
import subprocess
import sys

from conftest import cli_env

OPTIONS_MODULES = ("cloudtrain_local.options", "cloudtrain_docker.options", "cloudtrain_kubernetes.options",
                   "cloudtrain_aws.options", "cloudtrain_aws.eks", "cloudtrain_azure.options",
                   "cloudtrain_tione.options", "cloudtrain_modelarts.options", "cloudtrain.spec.job",
                   "cloudtrain.providers.provider")
CODE = """
import importlib, json, sys
from pydantic import BaseModel
modules = [importlib.import_module(m) for m in sys.argv[1].split(",")]
models = {v for m in modules for v in vars(m).values()
          if isinstance(v, type) and issubclass(v, BaseModel) and v is not BaseModel}

def built():
    return sorted(m.__name__ for m in models if m.__pydantic_complete__)

print("IMPORTED", json.dumps(built()))
from cloudtrain import load_job, render
render(load_job(sys.argv[2], provider="kubeflow"), "kubeflow")
print("RENDERED", json.dumps(built()))
"""


def test_importing_builds_no_model_and_a_render_builds_its_providers_options_alone(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: m\ncommand: python train.py\nimage: python:3.11\ndistribution: {nodes: 2}\n")
    proc = subprocess.run([sys.executable, "-c", CODE, ",".join(OPTIONS_MODULES), str(job)], capture_output=True,
                          text=True, env=cli_env(plugins=False), cwd=str(tmp_path))
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("IMPORTED", "RENDERED")))
    assert lines.get("IMPORTED") == "[]", proc.stdout + proc.stderr[-2000:]
    built = json.loads(lines["RENDERED"])
    options = [name for name in built if name.endswith("Options")]
    assert options == ["KubeflowOptions"] and "JobSpec" in built, built
