"""The command line: exit codes, one-line errors, nothing started on bad input, lazy imports."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import cli_env, run_cli, write_job

CLOUD_SDKS = ("boto3", "botocore", "azure", "kubernetes", "docker", "tencentcloud", "huaweicloudsdkcore",
              "huaweicloudsdkmodelarts", "obs", "torch", "ray")
JOB = """
name: cli-job
command: python train.py
distribution: {type: ddp, nodes: 2, procs_per_node: 2}
secrets: {TOKEN: {from_env: CT_TEST_TOKEN}}
"""


def assert_one_line_error(proc, code, text):
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert text in proc.stderr


def test_help_and_render_import_no_cloud_sdk_or_torch(tmp_path):
    job = write_job(tmp_path, JOB)
    code = ("import sys; from cloudtrain.commands.cli import main; rc = main(sys.argv[1:]); "
            "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & set(%r)))" % (CLOUD_SDKS,))
    for args in (["--help"], ["render", "-p", "local", str(job)], ["providers"], ["validate", str(job)]):
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env=cli_env({"CT_TEST_TOKEN": "x"}))
        if args == ["--help"]:
            assert proc.returncode == 0 and "submit" in proc.stdout
            continue
        assert "LOADED []" in proc.stdout, (args, proc.stdout[-300:], proc.stderr)


BUILT_IN_PROVIDERS = ("azure", "docker", "ec2", "eks", "kubeflow", "kubeflow-trainer", "local", "modelarts",
                      "modelarts-lite", "sagemaker", "tione", "volcano")
# What validate of the digits job needs to pass on a cloud provider (example values, offline)
CLOUD_SETTINGS = {
    "sagemaker": {"output_s3": "s3://ct-test/runs", "region": "us-east-1",
                  "role_arn": "arn:aws:iam::123456789012:role/train"},
    "ec2": {"code_s3": "s3://ct-test/code", "region": "us-east-1", "instance_profile": "cloudtrain-node",
            "image_id": "ami-0123456789abcdef0"},
    "eks": {"cluster": "ct-test", "region": "us-east-1"},
    "azure": {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "rg", "workspace": "ws"},
    "tione": {"code_store": "cos://ct-test-1250000000/code", "region": "ap-shanghai"},
    "modelarts": {"code_store": "obs://ct-test/code/", "region": "cn-north-4"},
}
DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits-ddp" / "job.yaml"


def test_render_and_validate_of_every_provider_import_no_cloud_sdk_or_torch():
    """Render and validate are offline: neither imports a cloud SDK (the provider's own or another's),
    for any built-in provider; one process runs them all one after the other, so the modules
    loaded add up and the first provider whose line names a module is the one that imported it."""
    code = ("import sys, json\nfrom cloudtrain.commands.cli import main\n"
            "from cloudtrain.extend.plugins import providers\n"
            "print('PROVIDERS', json.dumps(sorted(providers())))\n"
            "for name, settings in json.loads(sys.argv[2]):\n"
            "    for command in ('render', 'validate'):\n"
            "        sets = ['--set=providers.%s.%s=%s' % (name, k, v) for k, v in settings.items()]\n"
            "        rc = main([command, '-p', name, sys.argv[1], *sets])\n"
            "        loaded = {m.split('.')[0] for m in sys.modules} & set(sys.argv[3:])\n"
            "        print('LOADED', command, name, rc, sorted(loaded))\n")
    plan = [(name, CLOUD_SETTINGS.get(name, {})) for name in BUILT_IN_PROVIDERS]
    proc = subprocess.run([sys.executable, "-c", code, str(DIGITS), json.dumps(plan), *CLOUD_SDKS],
                          capture_output=True, text=True, env=cli_env(plugins=False), cwd=str(DIGITS.parent))
    listed = [line for line in proc.stdout.splitlines() if line.startswith("PROVIDERS")]
    assert listed and set(BUILT_IN_PROVIDERS) <= set(json.loads(listed[0][len("PROVIDERS "):])), proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("LOADED")]
    assert lines == [f"LOADED {command} {name} 0 []" for name in BUILT_IN_PROVIDERS
                     for command in ("render", "validate")], proc.stderr[-2000:]


def test_a_command_imports_no_other_commands_module(tmp_path):
    """`render` parses with a parser of its own: doctor, completion, init and prune (modules of
    their own) are not imported; `doctor --help` and the top-level `--help` still know them."""
    job = write_job(tmp_path, JOB)
    own = ["cloudtrain.commands.doctor", "cloudtrain.commands.completion", "cloudtrain.commands.initcmd",
           "cloudtrain.commands.prune"]
    code = ("import sys\nfrom cloudtrain.commands.cli import main\ntry: main(sys.argv[2:])\nexcept SystemExit: pass\n"
            "print('LOADED', sorted(m for m in sys.modules if m in sys.argv[1].split(',')))")
    runs = {}
    for args in (["render", "-p", "local", str(job)], ["--help"], ["doctor", "--help"]):
        proc = subprocess.run([sys.executable, "-c", code, ",".join(own), *args], capture_output=True, text=True,
                              env=cli_env({"CT_TEST_TOKEN": "x"}))
        runs[args[0]] = proc.stdout
    assert runs["render"].strip().endswith("LOADED []"), runs["render"][-500:]
    assert "usage: cloudtrain doctor" in runs["doctor"] and "cloudtrain.commands.doctor" in runs["doctor"]
    assert all(name in runs["--help"] for name in ("doctor", "completion", "init", "prune", "render"))


def test_help_does_not_import_pydantic():
    proc = subprocess.run([sys.executable, "-c", "import sys\nfrom cloudtrain.commands.cli import main\n"
                           "try: main(['--help'])\nexcept SystemExit: pass\nprint('pydantic' in sys.modules)"],
                          capture_output=True, text=True, env=cli_env())
    assert proc.stdout.strip().endswith("False")


def test_command_help_imports_no_cloud_sdk_nor_pydantic():
    code = ("import sys\nfrom cloudtrain.commands.cli import main\ntry: main(sys.argv[1:])\nexcept SystemExit: pass\n"
            "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & set(%r + ('pydantic',))))" % (CLOUD_SDKS,))
    for args in (["--help"], ["stage", "--help"], ["submit", "--help"]):
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=cli_env())
        assert ("usage: cloudtrain" in proc.stdout
                and proc.stdout.strip().endswith("LOADED []")), (args, proc.stdout[-300:])


def test_stage_on_a_provider_whose_code_travels_in_its_request_is_bad_input(tmp_path):
    job = write_job(tmp_path, JOB)
    proc = run_cli("stage", "-p", "local", job, env={"CT_TEST_TOKEN": "x"})
    assert_one_line_error(proc, 2, "local sends the code inside its request")
    assert "cloudtrain submit ships it" in proc.stderr


def test_render_yaml_and_json_envelope(tmp_path):
    job = write_job(tmp_path, JOB)
    proc = run_cli("render", "-p", "local", job, "-o", "json", env={"CT_TEST_TOKEN": "tok-123456"}, check=0)
    envelope = json.loads(proc.stdout)
    assert envelope["provider"] == "local" and envelope["job"] == "cli-job"
    assert [a["kind"] for a in envelope["artifacts"]] == ["local/process", "local/process"]
    assert envelope["artifacts"][1]["content"]["env"]["CLOUDTRAIN_NODE_RANK"] == "1"
    assert envelope["artifacts"][0]["content"]["env"]["TOKEN"] == "***"
    assert "tok-123456" not in proc.stdout
    docs = list(yaml.safe_load_all(run_cli("render", "-p", "local", job, check=0).stdout))
    assert [d["node"] for d in docs] == [0, 1]


def test_render_without_a_provider_uses_the_default_one(tmp_path):
    """No -p: the settings' default provider (docs/configuration.md), else local."""
    job = write_job(tmp_path, JOB)
    config = tmp_path / "config.yaml"
    config.write_text("provider: fakeone\n")
    named = json.loads(run_cli("render", job, "-o", "json", env={"CLOUDTRAIN_CONFIG": str(config)}, check=0).stdout)
    assert named["provider"] == "fakeone"
    plain = json.loads(run_cli("render", job, "-o", "json", env={"CLOUDTRAIN_CONFIG": str(tmp_path / "none.yaml")},
                               check=0).stdout)
    assert plain["provider"] == "local"


def test_emulate_injects_another_platforms_environment(tmp_path):
    job = write_job(tmp_path, JOB)
    envelope = json.loads(run_cli("render", "-p", "local", job, "--emulate", "fakeone", "-o", "json",
                                  env={"CT_TEST_TOKEN": "x"}, check=0).stdout)
    env = envelope["artifacts"][1]["content"]["env"]
    assert env["WORLD_SIZE"] == "2" and env["RANK"] == "1" and env["INDEX"] == "1"
    assert env["CLOUDTRAIN_DETECTORS"] == "fakeone=ct_fakeone.detect:detect"
    assert "CLOUDTRAIN_NUM_NODES" not in env


@pytest.mark.parametrize("args,text", [
    (["submit", "missing.yaml"], "missing.yaml: no such file"),
    (["submit", "JOB", "--set", "distribution.nodes=0"],
     "--set distribution.nodes=0: distribution.nodes: must be ≥ 1, got 0"),
    (["submit", "-p", "nowhere", "JOB"], "unknown provider 'nowhere'; installed providers:"),
    (["submit", "JOB", "--emulate", "nowhere"], "unknown provider 'nowhere'"),
    (["validate", "JOB", "--set", "providers.local.bogus=1"], "providers.local.bogus: unknown field"),
    (["status", "not-a-handle"], "is not a job handle; expected PROVIDER://ID"),
    (["status", "local://no-such-job"], "no local job 'no-such-job'"),
    (["cancel", "azure-typo://x"], "unknown provider 'azure-typo'"),
])
def test_bad_input_exits_2_with_one_line_and_starts_nothing(tmp_path, home, args, text):
    job = write_job(tmp_path, JOB)
    args = [str(job) if a == "JOB" else a for a in args]
    proc = run_cli(*args, env={"CT_TEST_TOKEN": "x"}, cwd=tmp_path)
    assert_one_line_error(proc, 2, text)
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())


def test_missing_secret_names_the_line_and_starts_nothing(tmp_path, home):
    job = write_job(tmp_path, JOB)
    proc = run_cli("submit", job)
    assert_one_line_error(proc, 2, f"{job}:4: secrets.TOKEN: environment variable CT_TEST_TOKEN is not set")
    assert not (home / "runs").exists()


def test_validate_reports_the_shape(tmp_path):
    proc = run_cli("validate", write_job(tmp_path, JOB), env={"CT_TEST_TOKEN": "x"}, check=0)
    assert "ok (local: ddp, 2 node(s) x 2 process(es))" in proc.stdout


def test_providers_lists_plugin_extra_and_sdk():
    rows = json.loads(run_cli("providers", "-o", "json", check=0).stdout)
    local = next(r for r in rows if r["provider"] == "local")
    assert local == {"provider": "local", "plugin": "local", "extra": "local", "sdk_missing": [],
                     "install": "pip install 'cloudtrain[local]'", "description": local["description"]}
    assert any(r["provider"] == "fakeone" and r["plugin"] == "ct_fakeone.plugin" for r in rows)


def test_disabled_plugins_are_not_loaded():
    disabled = "ct_fakeone.plugin,docker,kubernetes,aws,azure,tione,modelarts,slurm"
    rows = json.loads(run_cli("providers", "-o", "json", env={"CLOUDTRAIN_DISABLE_PLUGINS": disabled},
                              check=0).stdout)
    assert [r["provider"] for r in rows] == ["local"]


def test_dry_run_sends_nothing(tmp_path, home):
    proc = run_cli("submit", write_job(tmp_path, JOB), "--dry-run", "-o", "json", env={"CT_TEST_TOKEN": "x"}, check=0)
    assert json.loads(proc.stdout)["provider"] == "local"
    assert not (home / "runs").exists()
