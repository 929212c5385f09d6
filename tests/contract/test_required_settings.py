"""The contract of what a submit needs: every provider declares the options it cannot submit
without (``Provider.required``, with an example each), ``validate`` fails for a job missing any
one of them, names every missing one in one run, and passes once a settings file gives them all.
Parametrized over every registered provider, so a new cloud provider is covered as it registers.
"""
import pytest

from cloudtrain import plugins
from cloudtrain.api import validate
from cloudtrain.errors import BadInput

PROVIDERS = sorted(plugins.providers())
NEEDS = {n: dict(plugins.get_provider_class(n).required) for n in PROVIDERS}
CLOUDS = [n for n in PROVIDERS if NEEDS[n]]
# What each submits to: an account's role, bucket, workspace, cluster or region (the clouds
# cloudtrain ships; a third-party provider declares its own).
ACCOUNT_VALUES = {"sagemaker": {"role_arn", "output_s3", "region"}, "ec2": {"image_id", "instance_profile", "code_s3", "region"},
                  "eks": {"cluster", "region"}, "azure": {"subscription_id", "resource_group", "workspace"},
                  "tione": {"code_store", "region"}, "modelarts": {"code_store", "flavor_id", "region"}}
JOB = "name: needs\ncode: .\ncommand: python train.py\nimage: example/train:1\n"


@pytest.fixture
def nowhere_else(monkeypatch, tmp_path):
    """No region or workspace from the SDKs' environments: only what the settings give counts."""
    for var in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "TENCENTCLOUD_REGION", "HUAWEICLOUD_SDK_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.chdir(tmp_path)  # no Azure ML config.json here or above


def job_with_settings(tmp_path, monkeypatch, name, options):
    import yaml
    (tmp_path / "code").mkdir(exist_ok=True)
    job = tmp_path / "code" / "job.yaml"
    job.write_text(JOB)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"providers": {name: options}} if options else {}))
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    return job


def test_every_cloud_provider_declares_what_it_needs():
    for name, options in ACCOUNT_VALUES.items():
        assert set(NEEDS.get(name, {})) == options, name


@pytest.mark.parametrize("name", CLOUDS)
def test_a_job_with_every_required_setting_validates(name, tmp_path, monkeypatch, nowhere_else):
    job = job_with_settings(tmp_path, monkeypatch, name, NEEDS[name])
    options = validate(job, name)
    for option, value in NEEDS[name].items():
        assert getattr(options, option) == value


@pytest.mark.parametrize("name,missing", [(n, o) for n in CLOUDS for o in NEEDS[n]])
def test_a_job_missing_a_required_setting_fails_validate(name, missing, tmp_path, monkeypatch, nowhere_else):
    settings = {k: v for k, v in NEEDS[name].items() if k != missing}
    job = job_with_settings(tmp_path, monkeypatch, name, settings)
    with pytest.raises(BadInput) as info:
        validate(job, name)
    lines = str(info.value).splitlines()
    assert any(f"providers.{name}.{missing}: is not set; {name} needs it to submit" in line for line in lines), lines
    assert any(f"cloudtrain config set -p {name} {missing}=" in line for line in lines)
    assert not any(f"providers.{name}.{other}:" in line for other in settings for line in lines), lines


@pytest.mark.parametrize("name", CLOUDS)
def test_validate_names_every_missing_setting_at_once(name, tmp_path, monkeypatch, nowhere_else):
    job = job_with_settings(tmp_path, monkeypatch, name, {})
    with pytest.raises(BadInput) as info:
        validate(job, name)
    lines = str(info.value).splitlines()
    for option in NEEDS[name]:
        assert sum(f"providers.{name}.{option}: is not set" in line for line in lines) == 1, lines
    assert all(line.startswith(f"{job}:") for line in lines), lines
