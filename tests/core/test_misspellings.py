"""A misspelt command, provider or field gets the nearest right name ("did you mean")."""
import pytest

from conftest import run_cli, write_job

JOB = "name: typo\ncommand: python train.py\n"


@pytest.mark.parametrize("args,expected", [
    (["rendr", "-p", "local", "JOB"], "unknown command 'rendr'; did you mean 'render'?"),
    (["valdate", "JOB"], "unknown command 'valdate'; did you mean 'validate'?"),
    (["frobnicate"], "unknown command 'frobnicate'; cloudtrain --help lists the commands"),
    (["render", "-p", "sagmaker", "JOB"],
     "unknown provider 'sagmaker'; did you mean 'sagemaker'? (installed providers: "),
    (["validate", "-p", "local", "JOB", "--set", "distributon.nodes=2"],
     "--set distributon.nodes=2: distributon: unknown field; did you mean 'distribution'?"),
    (["validate", "-p", "local", "JOB", "--set", "providers.local.master_prot=29400"],
     "--set providers.local.master_prot=29400: providers.local.master_prot: unknown field; "
     "did you mean 'master_port'?"),
])
def test_a_misspelling_gets_the_nearest_name(tmp_path, args, expected):
    job = write_job(tmp_path, JOB)
    proc = run_cli(*[str(job) if a == "JOB" else a for a in args])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"cloudtrain: error: {expected}"), proc.stderr


def test_a_misspelt_provider_section_points_at_its_line(tmp_path):
    job = write_job(tmp_path, JOB + "providers:\n  local: {}\n  azur: {compute: gpu}\n")
    proc = run_cli("validate", job)
    assert proc.returncode == 2
    assert proc.stderr == f"cloudtrain: error: {job}:5: providers.azur: unknown provider; did you mean 'azure'?\n"
