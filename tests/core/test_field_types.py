"""A job file's field takes its own type and says so at its line (issue 44, item 9): no ``yes``
for a count, no ``"no"`` for false, no float for a whole number; ``--set`` values stay typed as
YAML reads them (``--set spot=true`` works)."""
import pytest

from conftest import run_cli, write_job

JOB = "name: types\ncommand: [python, train.py]\n"


@pytest.mark.parametrize("lines,line,field,expected", [
    ("max_restarts: yes\n", 3, "max_restarts", "must be a whole number, got 'yes' (YAML reads yes as true)"),
    ('spot: "no"\n', 3, "spot", "must be true or false, got the text 'no'; write true or false, without quotes"),
    ("spot: 1\n", 3, "spot", "must be true or false, got 1"),
    ("max_restarts: 2.5\n", 3, "max_restarts", "must be a whole number, got 2.5"),
    ("distribution:\n  nodes: \"2\"\n", 4, "distribution.nodes",
     "must be a whole number, got the text '2'; write the number without quotes"),
    ("resources:\n  gpus_per_node: on\n", 4, "resources.gpus_per_node",
     "must be a whole number, got 'on' (YAML reads on as true)"),
    ("resources:\n  memory_gb: '16'\n", 4, "resources.memory_gb", "must be a number, got the text '16'"),
    ("restart_on:\n  - exit-codes: [1, true]\n", 4, "restart_on.0.ExitCodes.exit-codes.1", "must be a whole number"),
])
def test_a_field_of_another_type_is_refused_at_its_line(tmp_path, lines, line, field, expected):
    job = write_job(tmp_path, JOB + lines)
    proc = run_cli("validate", "-p", "local", job)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"cloudtrain: error: {job}:{line}: {field}: {expected}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_set_values_are_typed_as_yaml_reads_them(tmp_path):
    job = write_job(tmp_path, JOB)
    proc = run_cli("render", "-p", "local", job, "--set", "spot=true", "--set", "max_restarts=2",
                   "--set", "distribution.nodes=2", "--set", "resources.memory_gb=1.5")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("validate", "-p", "local", job, "--set", "max_restarts=yes")
    assert proc.returncode == 2
    assert "--set max_restarts=yes: max_restarts: must be a whole number, got 'yes'" in proc.stderr, proc.stderr


def test_the_right_types_still_pass(tmp_path):
    job = write_job(tmp_path, JOB + "spot: false\nmax_restarts: 1\nresources:\n  cpus_per_node: 2\n"
                    "  memory_gb: 1.5\ndistribution:\n  nodes: 2\n")
    proc = run_cli("validate", "-p", "local", job)
    assert proc.returncode == 0, proc.stderr
