"""Job files: validation with file:line:field errors, overrides, schema."""
import json
from pathlib import Path

import jsonschema
import pytest

from cloudtrain.spec.errors import BadInput, JobFileError
from cloudtrain.input.loading import JobFileProblems, load_job, parse_override
from cloudtrain.extend.plugins import get_provider
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
    (("name: digits-ddp", "name: Digits_DDP"),
     "job.yaml:1: name: 'Digits_DDP' must be lowercase letters, digits and '-'"),
    (("code: .", "code: .\ncomand: x"), "job.yaml:3: comand: unknown field"),
    (("command: python train.py --epochs 5\n", ""), "job.yaml:1: command: is required"),
    (("  procs_per_node: 2", "  procs_per_node: two"),
     "job.yaml:7: distribution.procs_per_node: must be a whole number, got 'two'"),
    (("env: {OMP_NUM_THREADS: 1}", "env: {1BAD: x}"),
     "job.yaml:8: env: '1BAD' is not a valid environment variable name"),
    (("{HF_TOKEN: {from_env: HF_TOKEN}}", "{HF_TOKEN: {}}"),
     "job.yaml:9: secrets.HF_TOKEN: give exactly one of from_env or from_file"),
    (("env: {OMP_NUM_THREADS: 1}", "env: {HF_TOKEN: x}"), "job.yaml:1: HF_TOKEN is both in env and in secrets"),
])
def test_errors_name_file_line_and_field(tmp_path, edit, expected):
    path = write_job(tmp_path, GOOD.replace(*edit))
    with pytest.raises(JobFileError) as info:
        load_job(path)
    assert str(info.value).replace(str(tmp_path) + "/", "").startswith(expected), str(info.value)


def test_ps_worker_needs_a_worker(tmp_path):
    path = write_job(tmp_path, GOOD.replace("type: ddp", "type: ps-worker").replace("procs_per_node: 2", "ps: 2"))
    with pytest.raises(JobFileError, match=r"job.yaml:4: distribution: ps-worker needs at least one worker: "
                                           r"ps \(2\) must be < nodes \(2\)"):
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
    assert job.env["EXTRA"] == "yes"  # a string field takes the value as written
    assert job.image == "repo/img:1"
    job = load_job(write_job(tmp_path, GOOD), {"distribution.type": "mpi"})
    assert job.distribution.type == "mpi"


def test_override_errors_name_the_override(tmp_path):
    with pytest.raises(JobFileError, match=r"^--set distribution.nodes=-1: distribution.nodes: must be ≥ 1, got -1$"):
        load_job(write_job(tmp_path, GOOD), ["distribution.nodes=-1"])
    with pytest.raises(JobFileError, match=r"^--set distribution.ps=3: distribution: ps is only for type ps-worker$"):
        load_job(write_job(tmp_path, GOOD), ["distribution.ps=3"])
    with pytest.raises(JobFileError, match=r"^--set providers.local.master_port=80: providers.local.master_port: "
                                           r"must be ≥ 1024, got 80$"):
        get_provider("local").validate(load_job(write_job(tmp_path, GOOD), ["providers.local.master_port=80"]))
    with pytest.raises(BadInput, match="expected KEY=VALUE"):
        parse_override("distribution.nodes")


def test_overrides_do_not_leak_into_the_caller(tmp_path):
    from cloudtrain.input.loading import job_from_dict
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
    from cloudtrain.input.loading import load_job
    for word in ("on", "off", "auto"):
        path = write_job(tmp_path / word, f"name: r\ncommand: python t.py\nnetwork: {{rdma: {word}}}\n")
        assert load_job(path).network.rdma == word


AS_WRITTEN = """
name: "0755"
command: python train.py
image: 3.10
code: 2024.10
env: {VERSION: 1.10, MODE: on, PERM: 0755, RUN: no, HEX: 0x1F, TIME: 1:30, NUM: 12, QUOTED: "1.10"}
secrets: {TOKEN: {from_file: 0755}}
distribution: {nodes: 2, procs_per_node: 1}
network: {rdma: on}
providers:
  local: {master_port: 29400}
  docker: {python: 3.10, workdir: 0755}
"""


def test_values_stay_as_written(tmp_path):
    (tmp_path / "2024.10").mkdir()
    job = load_job(write_job(tmp_path, AS_WRITTEN))
    assert job.env == {"VERSION": "1.10", "MODE": "on", "PERM": "0755", "RUN": "no", "HEX": "0x1F",
                       "TIME": "1:30", "NUM": "12", "QUOTED": "1.10"}  # PyYAML: 1.1, True, 493, False, 31, 90
    assert (job.name, job.image, job.code, job.secrets["TOKEN"].from_file) == ("0755", "3.10", "2024.10", "0755")
    assert job.network.rdma == "on" and job.distribution.nodes == 2  # numbers stay numbers where wanted
    assert get_provider("local").validate(job).master_port == 29400
    docker = get_provider("docker").options(job)
    assert (docker.python, docker.workdir) == ("3.10", "0755")
    # and so they reach the nodes
    env = get_provider("local").render(job).artifacts[0].content["env"]
    assert {k: env[k] for k in ("VERSION", "MODE", "PERM", "RUN")} == {
        "VERSION": "1.10", "MODE": "on", "PERM": "0755", "RUN": "no"}


def test_set_values_stay_as_written(tmp_path):
    job = load_job(write_job(tmp_path, GOOD), ["env.PERM=0755", "env.V=1.10", "env.ON=on", "network.rdma=off",
                                               "distribution.nodes=3", "image=3.10"])
    assert (job.env["PERM"], job.env["V"], job.env["ON"]) == ("0755", "1.10", "on")
    assert (job.network.rdma, job.distribution.nodes, job.image) == ("off", 3, "3.10")
    job = load_job(write_job(tmp_path, GOOD.replace("env: {OMP_NUM_THREADS: 1}", "env: {A: 1.10}")),
                   ["env={B: 0755}"])
    assert job.env == {"B": "0755"}


def test_a_key_given_twice_is_an_error_at_its_line(tmp_path):
    path = write_job(tmp_path, GOOD.replace("  nodes: 2\n", "  nodes: 2\n  nodes: 3\n"))
    with pytest.raises(JobFileError) as info:
        load_job(path)
    assert str(info.value) == (f"{path}:7: distribution.nodes: given twice in one mapping (also at line 6); "
                               "YAML would keep only this one: remove one")


def test_every_problem_is_reported_at_once(tmp_path):
    path = write_job(tmp_path, GOOD.replace("  nodes: 2", "  nodes: 0\n  nodez: 1").replace(
        "code: .", "code: .\ncomand: x\nenv: {A: '1'}").replace("procs_per_node: 2", "procs_per_node: two"))
    with pytest.raises(JobFileProblems) as info:
        load_job(path, ["max_restarts=-1"])
    assert str(info.value).replace(str(tmp_path) + "/", "").splitlines() == [  # in the file's order
        "job.yaml:3: comand: unknown field; did you mean 'command'?",
        "job.yaml:8: distribution.nodes: must be ≥ 1, got 0",
        "job.yaml:9: distribution.nodez: unknown field; did you mean 'nodes'?",
        "job.yaml:10: distribution.procs_per_node: must be a whole number, got 'two'",
        "job.yaml:11: env: given twice in one mapping (also at line 4); YAML would keep only this one: remove one",
        "--set max_restarts=-1: max_restarts: must be ≥ 0, got -1",
    ]


def test_validate_prints_every_problem_on_its_own_line(tmp_path):
    path = write_job(tmp_path, GOOD.replace("  nodes: 2", "  nodes: 0").replace("code: .", "code: .\ndistributon: {}"))
    proc = run_cli("validate", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"cloudtrain: error: {path}:3: distributon: unknown field; did you mean 'distribution'?",
        f"cloudtrain: error: {path}:7: distribution.nodes: must be ≥ 1, got 0",
    ]


def test_a_provider_section_must_name_a_known_provider(tmp_path):
    path = write_job(tmp_path, GOOD + "providers:\n  sagmaker: {role_arn: x}\n  kubeflow-trainer: {}\n  fakeone: {}\n")
    with pytest.raises(JobFileError) as info:
        load_job(path)
    # kubeflow-trainer is one of cloudtrain's own (installed or not), fakeone an installed plugin's
    assert str(info.value) == f"{path}:11: providers.sagmaker: unknown provider; did you mean 'sagemaker'?"
    with pytest.raises(JobFileError, match=r"providers.nowhere: unknown provider; fix the name, or install"):
        load_job(write_job(tmp_path, GOOD + "providers: {nowhere: {}}\n"))


def test_a_relative_code_from_set_is_relative_to_the_current_directory(tmp_path, monkeypatch):
    path = write_job(tmp_path / "project", GOOD.replace("code: .", "code: src"))
    monkeypatch.chdir(tmp_path)
    assert load_job(path).code_path == (tmp_path / "project" / "src").resolve()
    assert load_job(path, ["code=other"]).code_path == (tmp_path / "other").resolve()
    assert load_job(path, ["code=/abs/dir"]).code_path == Path("/abs/dir")
