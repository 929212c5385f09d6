"""Job files: validation with file:line:field errors, overrides, schema."""
import json

import jsonschema
import pytest

from cloudtrain.errors import BadInput, JobFileError
from cloudtrain.loading import load_job, parse_override
from conftest import EXAMPLES, run_cli, write_job

GOOD = """
name: digits-ddp
code: .
command: python train.py --epochs 5
distribution:
  type: ddp
  nodes: 2
  procs_per_node: 2
env: {OMP_NUM_THREADS: 1}
secrets: {HF_TOKEN: {from_env: HF_TOKEN}}
"""


def test_valid_job_loads_with_defaults(tmp_path):
    job = load_job(write_job(tmp_path, GOOD))
    assert job.distribution.nodes == 2 and job.procs_per_node == 2
    assert job.env == {"OMP_NUM_THREADS": "1"}  # scalars become strings
    assert job.code_path == tmp_path.resolve()
    assert job.argv == ["python", "train.py", "--epochs", "5"]
    assert job.network.rdma == "auto" and job.max_restarts == 0


@pytest.mark.parametrize("edit,expected", [
    (("  nodes: 2", "  nodes: 0"), "job.yaml:6: distribution.nodes: must be ≥ 1, got 0"),
    (("  type: ddp", "  type: dpp"), "job.yaml:5: distribution.type: must be "),
    (("name: digits-ddp", "name: Digits_DDP"), "job.yaml:1: name: 'Digits_DDP' does not match"),
    (("code: .", "code: .\ncomand: x"), "job.yaml:3: comand: unknown field"),
    (("command: python train.py --epochs 5\n", ""), "job.yaml:1: command: is required"),
    (("  procs_per_node: 2", "  procs_per_node: two"), "job.yaml:7: distribution.procs_per_node: input should be a valid integer"),
    (("env: {OMP_NUM_THREADS: 1}", "env: {1BAD: x}"), "job.yaml:8: env: '1BAD' is not a valid environment variable name"),
    (("{HF_TOKEN: {from_env: HF_TOKEN}}", "{HF_TOKEN: {}}"), "job.yaml:9: secrets.HF_TOKEN: give exactly one of from_env or from_file"),
    (("env: {OMP_NUM_THREADS: 1}", "env: {HF_TOKEN: x}"), "job.yaml:1: HF_TOKEN is both in env and in secrets"),
])
def test_errors_name_file_line_and_field(tmp_path, edit, expected):
    path = write_job(tmp_path, GOOD.replace(*edit))
    with pytest.raises(JobFileError) as info:
        load_job(path)
    assert str(info.value).replace(str(tmp_path) + "/", "").startswith(expected), str(info.value)


def test_ps_worker_needs_a_worker(tmp_path):
    path = write_job(tmp_path, GOOD.replace("type: ddp", "type: ps-worker").replace("procs_per_node: 2", "ps: 2"))
    with pytest.raises(JobFileError, match=r"job.yaml:4: distribution: ps-worker needs at least one worker: ps \(2\) must be < nodes \(2\)"):
        load_job(path)


def test_invalid_yaml_points_at_the_line(tmp_path):
    path = write_job(tmp_path, GOOD.replace("  nodes: 2", "  nodes: [2"))
    with pytest.raises(JobFileError, match=r"job.yaml:\d+: invalid YAML"):
        load_job(path)


@pytest.mark.parametrize("text,message", [("", "the file is empty"), ("- a\n- b\n", "the top level must be a mapping")])
def test_not_a_job(tmp_path, text, message):
    with pytest.raises(JobFileError, match=message):
        load_job(write_job(tmp_path, text or "\n"))


def test_missing_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        load_job(tmp_path / "nope.yaml")


def test_overrides_are_yaml_scalars(tmp_path):
    job = load_job(write_job(tmp_path, GOOD), ["distribution.nodes=4", "env.EXTRA=yes", "image=repo/img:1"])
    assert job.distribution.nodes == 4
    assert job.env["EXTRA"] == "true"
    assert job.image == "repo/img:1"
    job = load_job(write_job(tmp_path, GOOD), {"distribution.type": "mpi"})
    assert job.distribution.type == "mpi"


def test_override_errors_name_the_override(tmp_path):
    with pytest.raises(JobFileError, match=r"^--set distribution.nodes: must be ≥ 1, got -1"):
        load_job(write_job(tmp_path, GOOD), ["distribution.nodes=-1"])
    with pytest.raises(BadInput, match="expected KEY=VALUE"):
        parse_override("distribution.nodes")


def test_overrides_do_not_leak_into_the_caller(tmp_path):
    from cloudtrain.loading import job_from_dict
    data = {"name": "x", "command": "c", "distribution": {"nodes": 1}}
    job_from_dict(data, overrides={"distribution.nodes": 3})
    assert data["distribution"]["nodes"] == 1


def test_schema_is_valid_and_accepts_every_example():
    proc = run_cli("schema", check=0)
    schema = json.loads(proc.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "local" in schema["properties"]["providers"]["properties"]
    import yaml
    examples = sorted(EXAMPLES.glob("*/job.yaml"))
    assert len(examples) >= 4
    for path in examples:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
        load_job(path)  # and pydantic agrees
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "command": "c", "distribution": {"nodes": 0}}, schema)


def test_rdma_on_and_off_unquoted_mean_what_they_say(tmp_path):
    # YAML 1.1 reads bare on/off as booleans; the job file takes them as the words
    from cloudtrain.loading import load_job
    for word in ("on", "off", "auto"):
        path = write_job(tmp_path / word, f"name: r\ncommand: python t.py\nnetwork: {{rdma: {word}}}\n")
        assert load_job(path).network.rdma == word
