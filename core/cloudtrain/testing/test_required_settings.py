"""What a submit needs: a provider declares the options it cannot submit without
(``Provider.required``, with an example each); ``validate`` fails for a job missing any one of them
at the job file, names every missing one in one run, and passes once a settings file gives them all.
An option the provider's ``fallback`` supplies for the job at hand (an SDK's setting, a choice made
at submit) is not required of that job: validate must then not name it."""
import pytest
import yaml

from cloudtrain.extend import plugins
from cloudtrain.api import as_job, validate
from cloudtrain.spec.errors import BadInput
from cloudtrain.testing.jobs import required_settings

JOB = "name: needs\ncode: .\ncommand: python train.py\nimage: example/train:1\n"
SDK_SETTINGS = ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "TENCENTCLOUD_REGION", "HUAWEICLOUD_SDK_REGION")


def providers_here(names):
    return [n for n in names if plugins.get_provider_class(n).required]


@pytest.fixture
def nowhere_else(monkeypatch, tmp_path):
    """No region or workspace from an SDK's own settings: only what the settings file gives counts."""
    for var in SDK_SETTINGS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("HOME", str(tmp_path))


def job_with_settings(tmp_path, monkeypatch, name, options):
    (tmp_path / "code").mkdir(exist_ok=True)
    job = tmp_path / "code" / "job.yaml"
    job.write_text(JOB)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"providers": {name: options}} if options else {}))
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    return job


def supplied_elsewhere(name: str, job, option: str) -> bool:
    """Does ``name``'s ``fallback`` give ``option`` for this job (read with the settings file)?"""
    provider = plugins.get_provider(name)
    spec = as_job(job, "validate", provider)
    return bool(provider.fallback(option, spec, provider.options(spec)))


def test_a_job_with_every_required_setting_validates(cloudtrain_provider, tmp_path, monkeypatch, nowhere_else):
    needs = required_settings(cloudtrain_provider)
    options = validate(job_with_settings(tmp_path, monkeypatch, cloudtrain_provider, needs), cloudtrain_provider)
    for option, value in needs.items():
        assert getattr(options, option) == value


def test_a_job_missing_a_required_setting_fails_validate(cloudtrain_provider, tmp_path, monkeypatch, nowhere_else):
    name = cloudtrain_provider
    for missing in required_settings(name):
        settings = {k: v for k, v in required_settings(name).items() if k != missing}
        job = job_with_settings(tmp_path, monkeypatch, name, settings)
        needs = f"providers.{name}.{missing}: is not set; {name} needs it to submit"
        if supplied_elsewhere(name, job, missing):
            validate(job, name)  # nothing else is missing: it passes, and names no missing option
            continue
        with pytest.raises(BadInput) as info:
            validate(job, name)
        lines = str(info.value).splitlines()
        assert any(needs in line for line in lines), lines
        assert any(f"cloudtrain config set -p {name} {missing}=" in line for line in lines), lines
        assert not any(f"providers.{name}.{other}:" in line for other in settings for line in lines), lines


def test_validate_names_every_missing_setting_at_once(cloudtrain_provider, tmp_path, monkeypatch, nowhere_else):
    name = cloudtrain_provider
    job = job_with_settings(tmp_path, monkeypatch, name, {})
    with pytest.raises(BadInput) as info:
        validate(job, name)
    lines = str(info.value).splitlines()
    for option in required_settings(name):
        named = sum(f"providers.{name}.{option}: is not set" in line for line in lines)
        assert named == (0 if supplied_elsewhere(name, job, option) else 1), (option, lines)
    assert all(line.startswith(f"{job}:") for line in lines), lines
