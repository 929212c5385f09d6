"""The core messages of issue 30, item 8: each says what is wrong in the user's terms, at the
option or line the user gave, and points at the fix."""
import sys

import pytest

from cloudtrain.extend import plugins
from cloudtrain.spec.errors import BadInput
from cloudtrain.input.loading import job_from_dict
from conftest import run_cli, write_job

JOB = "name: digits\ncommand: python train.py\n"


def one_error(proc):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_name_that_is_only_too_long_is_told_so_without_a_regex(tmp_path):
    line = one_error(run_cli("validate", write_job(tmp_path, f"name: {'a' * 70}\ncommand: python t.py\n")))
    assert line.endswith("job.yaml:1: name: is 70 characters long; at most 63")
    assert "^" not in line


def test_a_name_with_wrong_characters_is_told_in_words_with_a_fixed_example(tmp_path):
    line = one_error(run_cli("validate", write_job(tmp_path, "name: My_Job\ncommand: python t.py\n")))
    assert "lowercase letters, digits and '-'" in line and "(e.g. 'my-job')" in line and "^" not in line


@pytest.mark.parametrize("key,meant", [("nodes", "distribution.nodes"), ("gpus_per_node", "resources.gpus_per_node"),
                                       ("nodse", "distribution.nodes"),
                                       ("procs_per_node", "distribution.procs_per_node")])
def test_a_section_field_given_at_the_top_suggests_its_section(tmp_path, key, meant):
    line = one_error(run_cli("validate", write_job(tmp_path, JOB), "--set", f"{key}=3"))
    assert line.endswith(f"{key}: unknown field; did you mean '{meant}'?"), line


def test_a_misspelt_top_level_field_still_suggests_its_sibling(tmp_path):
    line = one_error(run_cli("validate", write_job(tmp_path, JOB + "imag: x\n")))
    assert line.endswith("imag: unknown field; did you mean 'image'?")


def test_emulate_on_a_cloud_provider_blames_the_option_the_user_typed(tmp_path):
    line = one_error(run_cli("render", "-p", "sagemaker", "--emulate", "tione", write_job(tmp_path, JOB)))
    assert "--set" not in line and "--emulate" in line and "-p local --emulate tione" in line


def test_emulate_still_works_where_it_means_something(tmp_path):
    run_cli("render", "-p", "local", "--emulate", "tione", write_job(tmp_path, JOB), check=0)


# every provider with an SDK to miss (local's and slurm's run commands of this machine: they have none)
@pytest.mark.parametrize("name", sorted(n for n in set(plugins.providers()) - {"fakeone"}
                                        if plugins.get_provider_class(n).sdk_modules))
def test_validate_reports_a_missing_sdk_for_every_provider(name, tmp_path, monkeypatch):
    cls = plugins.get_provider_class(name)
    for module in cls.sdk_modules:
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # so no provider trips over the SDK by other checks
    (tmp_path / "train.py").write_text("")
    job = job_from_dict({"name": "x", "command": "python train.py", "code": str(tmp_path), "image": "a/b:1",
                         "providers": {name: dict(cls.required)}})
    with pytest.raises(BadInput) as info:
        plugins.get_provider(name).validate(job, submit=True)
    assert f"provider {name!r} needs the {cls.sdk_modules[0]!r} package" in str(info.value)
    assert cls.install_hint() in str(info.value)


@pytest.mark.parametrize("provider,item", [("sagemaker", "output_s3=notauri"), ("ec2", "code_s3=bucket-only"),
                                           ("tione", "instance_type=XX.NOPE")])
def test_config_set_refuses_what_validate_would_refuse_later(tmp_path, provider, item):
    config = tmp_path / "config.yaml"
    proc = run_cli("config", "set", "-p", provider, item, env={"CLOUDTRAIN_CONFIG": str(config)})
    line = one_error(proc)
    assert f"config set {item}:" in line and "nothing was written" in line
    assert not config.exists()


def test_config_set_still_takes_a_good_value(tmp_path):
    config = tmp_path / "config.yaml"
    run_cli("config", "set", "-p", "sagemaker", "output_s3=s3://bucket/out", env={"CLOUDTRAIN_CONFIG": str(config)},
            check=0)
    assert "s3://bucket/out" in config.read_text()


def test_a_colon_in_a_plain_value_gets_the_quoting_hint(tmp_path):
    line = one_error(run_cli("validate", write_job(tmp_path, "name: x\ncommand: python t.py --lr: 1\n")))
    assert "job.yaml:2: invalid YAML" in line and "must be quoted" in line


def test_a_tab_gets_the_spaces_hint(tmp_path):
    (tmp_path / "job.yaml").write_text("name: x\n\tcommand: python t.py\n")
    line = one_error(run_cli("validate", tmp_path / "job.yaml"))
    assert "job.yaml:2: invalid YAML" in line and "spaces, never tabs" in line


# -- outputs ---------------------------------------------------------------------------------
@pytest.fixture
def finished_job(tmp_path, home):
    job = write_job(tmp_path / "job", 'name: writes\ncommand: [python, -c, "import os; '
                                      'open(os.environ[\'CLOUDTRAIN_OUTPUT_DIR\']'
                                      ' + \'/m.txt\', \'w\').write(\'1\')"]\ndistribution: {type: none}\n')
    handle = run_cli("submit", job, "--detach", check=0).stdout.strip()
    assert run_cli("wait", handle).returncode == 0
    return handle


def test_outputs_o_json_is_refused_not_made_a_directory(tmp_path, finished_job):
    line = one_error(run_cli("outputs", finished_job, "-o", "json", cwd=tmp_path))
    assert "--dest" in line
    assert not (tmp_path / "json").exists()


def test_outputs_dest_and_the_older_o_both_download(tmp_path, finished_job):
    assert "downloaded 1 file to got" in run_cli("outputs", finished_job, "--dest", "got", cwd=tmp_path, check=0).stdout
    assert (tmp_path / "got" / "m.txt").read_text() == "1"
    run_cli("outputs", finished_job, "-o", "old", cwd=tmp_path, check=0)
    assert (tmp_path / "old" / "m.txt").read_text() == "1"


def test_outputs_of_a_job_that_wrote_nothing_says_so_and_makes_nothing(tmp_path, home):
    job = write_job(tmp_path / "job", 'name: sleeper\ncommand: [python, -c, "import time; time.sleep(300)"]\n'
                                      'distribution: {type: none}\n')
    handle = run_cli("submit", job, "--detach", check=0).stdout.strip()
    run_cli("cancel", handle, check=0)
    line = one_error(run_cli("outputs", handle, cwd=tmp_path))
    assert "wrote nothing" in line and "downloaded 0" not in line
    assert not (tmp_path / "outputs").exists()
