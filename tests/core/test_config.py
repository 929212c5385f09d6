"""Settings outside the job file (docs/configuration.md): the user config, the project file,
profiles, their precedence, errors at their file:line, `cloudtrain config`, no credentials."""
import json
import os
import stat
import textwrap

import pytest
import yaml

from cloudtrain.api import render, validate
from cloudtrain.input.config import Settings
from cloudtrain.spec.errors import JobFileError
from conftest import EXAMPLES, run_cli, write_job

JOB = """
name: portable
code: .
command: python train.py
image: example/train:1
"""
ACCOUNT = """
provider: sagemaker
providers:
  sagemaker:
    role_arn: "arn:aws:iam::123456789012:role/train"
    output_s3: "s3://team-bucket/out"
    region: us-east-1
    volume_gb: 40
  ec2: {image_id: ami-0123456789abcdef0, instance_profile: cloudtrain-node, \
code_s3: "s3://team-bucket/code", region: us-east-1}
  eks: {cluster: dev, region: us-east-1}
  azure: {subscription_id: 11111111-2222-3333-4444-555555555555, resource_group: team-rg, \
workspace: team-ws, compute: gpu-cluster}
  tione: {region: ap-shanghai, code_source: "cos://team-1250000000/code/", instance_type: TI.S.LARGE.POST}
  modelarts: {region: cn-north-4, code_dir: "obs://team/code/", flavor_id: modelarts.vm.cpu.8u}
  kubeflow: {namespace: team-ml, context: dev-cluster}
profiles:
  prod:
    provider: eks
    providers:
      eks: {cluster: prod, region: us-west-2}
      sagemaker: {role_arn: "arn:aws:iam::999999999999:role/prod", volume_gb: 80}
"""


def settings_file(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture
def account(tmp_path, monkeypatch):
    """A user config with every cloud's account values; no region from AWS's own files."""
    (tmp_path / "home").mkdir()
    config = settings_file(tmp_path / "home" / "config.yaml", ACCOUNT)
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    for var in ("AWS_DEFAULT_REGION", "AWS_PROFILE", "TENCENTCLOUD_REGION", "HUAWEICLOUD_SDK_REGION"):
        monkeypatch.delenv(var, raising=False)
    return config


def request_of(rendered, kind):
    return next(a.content for a in rendered.artifacts if a.kind == kind)


# -- the same job file, every cloud ------------------------------------------------------------------
def test_examples_carry_no_account_values():
    for job in sorted(EXAMPLES.glob("*/job.yaml")):
        assert "providers" not in yaml.safe_load(job.read_text()), f"{job}: account values belong in the config"


def test_one_job_file_renders_for_every_cloud_from_the_config(tmp_path, account):
    job = write_job(tmp_path / "job", JOB)
    assert "providers" not in yaml.safe_load(job.read_text())
    found = {
        "sagemaker": request_of(render(job, "sagemaker"), "sagemaker/CreateTrainingJob")["RoleArn"],
        "ec2": request_of(render(job, "ec2"), "ec2/RunInstances")["ImageId"],
        "azure": request_of(render(job, "azure"), "azureml/job")["compute"],
        "tione": request_of(render(job, "tione"), "tione/CreateTrainingTask")["DataConfigs"][0]["COSSource"]["Bucket"],
        "modelarts": request_of(render(job, "modelarts"), "modelarts/CreateTrainingJob")["algorithm"]["code_dir"],
        "eks": render(job, "eks").options.cluster,
        "kubeflow": render(job, "kubeflow").artifacts[0].content["metadata"]["namespace"],
    }
    assert found == {"sagemaker": "arn:aws:iam::123456789012:role/train", "ec2": "ami-0123456789abcdef0",
                     "azure": "azureml:gpu-cluster", "tione": "team-1250000000", "modelarts": "/team/code/",
                     "eks": "dev", "kubeflow": "team-ml"}
    for name in found:
        validate(job, name)  # and everything a submit needs is there


def test_render_and_validate_take_the_configs_provider(tmp_path, account):
    job = write_job(tmp_path / "job", JOB)
    envelope = json.loads(run_cli("render", job, "-o", "json", env={"CLOUDTRAIN_CONFIG": str(account)}, check=0).stdout)
    assert envelope["provider"] == "sagemaker"
    proc = run_cli("validate", job, env={"CLOUDTRAIN_CONFIG": str(account)}, check=0)
    assert "ok (sagemaker:" in proc.stdout
    proc = run_cli("validate", job, env={"CLOUDTRAIN_CONFIG": str(account), "CLOUDTRAIN_PROVIDER": "ec2"}, check=0)
    assert "ok (ec2:" in proc.stdout


# -- precedence ----------------------------------------------------------------------------------
def test_precedence_defaults_config_project_profile_job_set(tmp_path, account, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    settings_file(repo / ".cloudtrain.yaml", """
        providers:
          sagemaker: {volume_gb: 50, max_runtime_seconds: 3600, instance_type: ml.c5.xlarge}
        profiles:
          prod:
            providers:
              sagemaker: {max_runtime_seconds: 7200}
    """)
    job = write_job(repo / "train",
                    JOB + "providers:\n  sagemaker:\n    instance_type: ml.c5.2xlarge\n    tags: {team: a}\n")

    def options(profile=None, overrides=()):
        from cloudtrain.api import load_job
        from cloudtrain.extend.plugins import get_provider
        loaded = load_job(job, list(overrides), provider="sagemaker", profile=profile)
        return get_provider("sagemaker").options(loaded)

    plain = options()
    assert plain.python == "python3"                               # the provider's default
    assert plain.region == "us-east-1"                             # the user config
    assert plain.volume_gb == 50                                   # the project file over the user config
    assert plain.max_runtime_seconds == 3600
    assert plain.instance_type == "ml.c5.2xlarge"                  # the job file over the project file
    prod = options("prod")
    assert prod.role_arn == "arn:aws:iam::999999999999:role/prod"  # the user config's profile
    assert prod.volume_gb == 80                                    # a profile over the project file
    assert prod.max_runtime_seconds == 7200                        # the project file's profile
    assert prod.instance_type == "ml.c5.2xlarge"                   # the job file over any profile
    top = options("prod", ["providers.sagemaker.volume_gb=90", "providers.sagemaker.instance_type=ml.p3.2xlarge"])
    assert (top.volume_gb, top.instance_type) == (90, "ml.p3.2xlarge")  # --set over everything

    shown = json.loads(run_cli("config", "show", "-p", "sagemaker", "--profile", "prod", job, "--set",
                               "providers.sagemaker.volume_gb=90", "-o", "json",
                               env={"CLOUDTRAIN_CONFIG": str(account)}, check=0).stdout)
    sources = {row["option"]: row["source"] for row in shown["settings"]}
    lines = ACCOUNT.lstrip().splitlines()
    assert sources["region"] == f"{account}:{lines.index('    region: us-east-1') + 1}"
    assert sources["role_arn"] == f"{account}:{len(lines)}"
    assert sources["max_runtime_seconds"] == f"{repo / '.cloudtrain.yaml'}:6"
    assert sources["instance_type"] == f"{job}:7"
    assert sources["volume_gb"] == "--set providers.sagemaker.volume_gb=90"
    assert sources["python"] == "default"
    assert sources["code_s3"] == "default" and sources["subnets"] == "default"
    assert [f["kind"] for f in shown["files"]] == ["user config", "project file"]


def test_the_project_file_is_looked_for_up_to_the_repository_root(tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir()
    settings_file(outer / ".cloudtrain.yaml", "provider: eks\n")
    repo = outer / "repo"
    (repo / ".git").mkdir(parents=True)
    job = write_job(repo / "a" / "b", JOB)
    assert Settings.load(job).default_provider() == "local"  # above the repository: not ours
    settings_file(repo / ".cloudtrain.yaml", "provider: ec2\n")
    assert Settings.load(job).default_provider() == "ec2"


def test_a_profile_switches_the_provider_and_the_account(tmp_path, account):
    job = write_job(tmp_path / "job", JOB)
    env = {"CLOUDTRAIN_CONFIG": str(account)}
    dev = json.loads(run_cli("config", "show", "-p", "eks", "-o", "json", env=env, check=0).stdout)
    prod = json.loads(run_cli("config", "show", "--profile", "prod", "-o", "json", env=env, check=0).stdout)
    value = {r["option"]: r["value"] for r in dev["settings"]}, {r["option"]: r["value"] for r in prod["settings"]}
    assert (value[0]["cluster"], value[0]["region"]) == ("dev", "us-east-1")
    assert prod["provider"] == "eks" and (value[1]["cluster"], value[1]["region"]) == ("prod", "us-west-2")
    by_env = run_cli("validate", job, env={**env, "CLOUDTRAIN_PROFILE": "prod"}, check=0)
    assert "ok (eks:" in by_env.stdout
    sm = [json.loads(run_cli("render", "-p", "sagemaker", job, "-o", "json", *extra, env=env, check=0).stdout)
          for extra in ((), ("--profile", "prod"))]
    arns = [request["artifacts"][1]["content"]["RoleArn"] for request in sm]
    assert arns == ["arn:aws:iam::123456789012:role/train", "arn:aws:iam::999999999999:role/prod"]
    proc = run_cli("render", job, "--profile", "prdo", env=env)
    assert proc.returncode == 2 and f"no profile 'prdo' in {account}; did you mean 'prod'?" in proc.stderr


# -- errors at the settings file's line ------------------------------------------------------------------
def test_a_bad_option_in_the_config_points_at_its_line(tmp_path, monkeypatch):
    config = settings_file(tmp_path / "config.yaml", """
        providers:
          sagemaker:
            rol_arn: arn:aws:iam::123456789012:role/train
            volume_gb: 0
    """)
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    job = write_job(tmp_path / "job", JOB)
    with pytest.raises(JobFileError) as info:
        render(job, "sagemaker")
    assert str(info.value).splitlines() == [
        f"{config}:3: providers.sagemaker.rol_arn: unknown field; did you mean 'role_arn'?",
        f"{config}:4: providers.sagemaker.volume_gb: must be ≥ 1, got 0"]
    proc = run_cli("config", "show", env={"CLOUDTRAIN_CONFIG": str(config)})
    assert proc.returncode == 2
    assert f"cloudtrain: error: {config}:3: providers.sagemaker.rol_arn: unknown field; did you mean 'role_arn'?" \
        in proc.stderr.splitlines()


def test_the_shape_of_a_settings_file_is_checked_at_its_lines(tmp_path, monkeypatch):
    config = settings_file(tmp_path / "config.yaml", """
        provder: sagemaker
        providers:
          sagemakr: {region: us-east-1}
        profiles:
          prod:
            providers: {eks: {cluster: prod}}
            region: us-west-2
    """)
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    proc = run_cli("validate", write_job(tmp_path / "job", JOB), env={"CLOUDTRAIN_CONFIG": str(config)})
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"cloudtrain: error: {config}:1: provder: unknown key; did you mean 'provider'?",
        f"cloudtrain: error: {config}:3: providers.sagemakr: unknown provider; did you mean 'sagemaker'?",
        f"cloudtrain: error: {config}:7: profiles.prod.region: unknown key; a settings file has provider, providers"]


def test_a_profiles_option_is_located_in_its_profile(tmp_path, monkeypatch):
    config = settings_file(tmp_path / "config.yaml", """
        profiles:
          prod:
            providers:
              eks: {cluster: prod, regoin: us-west-2}
    """)
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    with pytest.raises(JobFileError, match=rf"^{config}:4: profiles.prod.providers.eks.regoin: unknown field; "
                                           "did you mean 'region'\\?$"):
        render(write_job(tmp_path / "job", JOB), "eks", profile="prod")


# -- validate: every problem at once ------------------------------------------------------------------
def test_validate_lists_every_missing_setting_in_one_run(tmp_path):
    job = write_job(tmp_path, JOB + "secrets: {HF_TOKEN: {from_env: CT_NOT_SET_ANYWHERE}}\n"
                                     "providers:\n  sagemaker: {code_s3: not-a-uri}\n")
    proc = run_cli("validate", "-p", "sagemaker", job, env={"AWS_CONFIG_FILE": str(tmp_path / "none"),
                                                              "AWS_DEFAULT_REGION": ""})
    assert proc.returncode == 2
    lines = [line.removeprefix("cloudtrain: error: ") for line in proc.stderr.splitlines()
             if line.startswith("cloudtrain: error: ")]  # (a warning names the Docker Hub image first)
    assert sorted(line.split(": ")[1] for line in lines) == sorted([  # every one, whichever check finds it first
        "providers.sagemaker.role_arn", "providers.sagemaker.output_s3", "providers.sagemaker.region",
        "secrets.HF_TOKEN", "providers.sagemaker.code_s3", "providers.sagemaker.secrets_manager"]), lines
    assert all(line.startswith(f"{job}:") for line in lines)
    submit = run_cli("submit", "-p", "sagemaker", job, env={"AWS_CONFIG_FILE": str(tmp_path / "none"),
                                                              "AWS_DEFAULT_REGION": ""})
    assert submit.returncode == 2 and submit.stderr == proc.stderr  # submit says the same, sends nothing


# -- cloudtrain config set / path; no credentials -----------------------------------------------------------
def test_config_set_writes_the_user_config(tmp_path):
    env = {"CLOUDTRAIN_CONFIG": "", "CLOUDTRAIN_HOME": str(tmp_path / "ct")}
    path = tmp_path / "ct" / "config.yaml"
    assert run_cli("config", "path", env=env, check=0).stdout.strip() == str(path)
    run_cli("config", "set", "provider=sagemaker", env=env, check=0)
    proc = run_cli("config", "set", "-p", "sagemaker", "role_arn=arn:aws:iam::123456789012:role/train",
                   "volume_gb=64", env=env, check=0)
    assert proc.stdout.splitlines() == [f"{path}: providers.sagemaker.role_arn set",
                                        f"{path}: providers.sagemaker.volume_gb set"]
    run_cli("config", "set", "-p", "eks", "--profile", "prod", "cluster=prod", env=env, check=0)
    assert yaml.safe_load(path.read_text()) == {
        "provider": "sagemaker",
        "providers": {"sagemaker": {"role_arn": "arn:aws:iam::123456789012:role/train", "volume_gb": 64}},
        "profiles": {"prod": {"providers": {"eks": {"cluster": "prod"}}}}}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    shown = run_cli("config", "show", env=env, check=0).stdout.splitlines()
    assert next(line for line in shown if line.startswith("volume_gb ")).split()[1:] == ["64", f"{path}:5"]
    bad = run_cli("config", "set", "-p", "sagemaker", "volum_gb=2", env=env)
    assert bad.returncode == 2 and "has no option 'volum_gb'; did you mean 'volume_gb'?" in bad.stderr
    bad = run_cli("config", "set", "-p", "sagemaker", "volume_gb=0", env=env)
    assert bad.returncode == 2 and "config set volume_gb=0: must be ≥ 1, got 0; nothing was written" in bad.stderr


@pytest.mark.parametrize("item,belongs", [
    ("region=AKIAIOSFODNN7EXAMPLE", "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"),
    ("tags.k=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws configure"),
    ("tags.client_secret=abc", "AZURE_CLIENT_SECRET"),
    ("tags.k=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE", "TENCENTCLOUD_SECRET_KEY"),
    ("tags.sk=anything", "HUAWEICLOUD_SDK_SK"),
])
def test_config_set_refuses_credentials_and_says_where_they_belong(tmp_path, item, belongs):
    env = {"CLOUDTRAIN_CONFIG": str(tmp_path / "config.yaml")}
    proc = run_cli("config", "set", "-p", "sagemaker", item, env=env)
    assert proc.returncode == 2 and belongs in proc.stderr and "nothing was written" in proc.stderr
    assert item.partition("=")[2] not in proc.stderr
    assert not (tmp_path / "config.yaml").exists()


def test_a_credential_in_a_settings_file_is_refused_at_its_line(tmp_path, monkeypatch):
    config = settings_file(tmp_path / "config.yaml", """
        providers:
          sagemaker:
            region: us-east-1
            tags: {key: AKIAIOSFODNN7EXAMPLE}
    """)
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    with pytest.raises(JobFileError) as info:
        render(write_job(tmp_path / "job", JOB), "sagemaker")
    assert str(info.value).startswith(f"{config}:4: providers.sagemaker.tags.key: looks like an AWS key; ")
    assert "AKIAIOSFODNN7EXAMPLE" not in str(info.value)


def test_config_show_masks_what_looks_like_a_secret(tmp_path, account):
    job = write_job(tmp_path / "job", JOB + "providers:\n  sagemaker:\n    tags: {leak: AKIAIOSFODNN7EXAMPLE}\n"
                                            "    code_s3: s3://team-bucket/code\n")
    proc = run_cli("config", "show", job, "--set", "providers.sagemaker.run_label=https://me:hunter2pw@example.com/x",
                   env={"CLOUDTRAIN_CONFIG": str(account)}, check=0)
    assert "AKIAIOSFODNN7EXAMPLE" not in proc.stdout and "hunter2pw" not in proc.stdout
    assert '{"leak": "***"}' in proc.stdout and "https://***@example.com/x" in proc.stdout  # user info masked whole
    assert "s3://team-bucket/code" in proc.stdout  # names are shown as they are


def test_only_commands_that_take_a_job_or_a_provider_read_the_settings(tmp_path):
    broken = settings_file(tmp_path / "config.yaml", "providers: [\n")
    env = {"CLOUDTRAIN_CONFIG": str(broken)}
    run_cli("--help", env=env, check=0)
    run_cli("schema", env=env, check=0)
    proc = run_cli("render", "-p", "local", write_job(tmp_path / "job", JOB), env=env)
    assert proc.returncode == 2 and f"{broken}:2: invalid YAML" in proc.stderr


def test_a_providers_own_check_points_at_the_settings_file_that_gave_the_value(tmp_path, monkeypatch):
    config = settings_file(tmp_path / "config.yaml", """
        providers:
          sagemaker:
            role_arn: "arn:aws:iam::123456789012:role/train"
            region: us-east-1
            output_s3: "s3://Team_Bucket/out"
    """)
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    job = write_job(tmp_path / "job", JOB)
    with pytest.raises(JobFileError) as info:
        validate(job, "sagemaker")
    assert str(info.value).startswith(f"{config}:5: providers.sagemaker.output_s3: 's3://Team_Bucket/out' is not "
                                      "an s3://bucket/prefix URI")
    with pytest.raises(JobFileError) as info:
        from cloudtrain.api import load_job
        from cloudtrain.extend.plugins import get_provider
        get_provider("sagemaker").validate(
            load_job(job, ["providers.sagemaker.output_s3=s3://x"], provider="sagemaker"), submit=True)
    assert str(info.value).startswith("--set providers.sagemaker.output_s3=s3://x: providers.sagemaker.output_s3: ")
