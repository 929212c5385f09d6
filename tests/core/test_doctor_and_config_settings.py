"""``doctor --online`` reads the settings every command reads (issue 44, item 4), and ``config set``
writes a failover profile (item 5)."""
import re

import pytest

from conftest import run_cli

NOT_INHERITED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION",
                 "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "CLOUDTRAIN_PROFILE")


@pytest.fixture
def user(tmp_path, monkeypatch):
    for name in NOT_INHERITED:
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.yaml"
    (tmp_path / "user").mkdir()
    return config, dict(HOME=str(tmp_path / "user"), CLOUDTRAIN_CONFIG=str(config),
                        CLOUDTRAIN_HOME=str(tmp_path / "state"),
                        AWS_CONFIG_FILE=str(tmp_path / "user/.aws/config"),
                        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "user/.aws/credentials"),
                        AWS_EC2_METADATA_DISABLED="true")


@pytest.mark.parametrize("profile", [None, "eu"])
def test_doctor_online_uses_the_configured_region(user, tmp_path, profile):
    """No AWS_DEFAULT_REGION: the region is only in the user config (or in a profile of it), as
    ``list -p sagemaker`` reads it; the read call reaches the loopback double with it."""
    from doubles.aws_double import AwsDouble
    config, env = user
    section = "{role_arn: 'arn:aws:iam::123456789012:role/t', output_s3: 's3://b/out', region: eu-west-1}"
    config.write_text(f"profiles:\n  eu:\n    providers:\n      sagemaker: {section}\n" if profile
                      else f"providers:\n  sagemaker: {section}\n")
    server = AwsDouble().start()  # empty: moto's state is global to this worker's process
    endpoint = server.endpoint
    try:
        env = dict(env, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=endpoint)
        words = ["doctor", "-p", "sagemaker", "--online", *(["--profile", profile] if profile else [])]
        proc = run_cli(*words, env=env)
        listed = run_cli("list", "-p", "sagemaker", *(["--profile", profile] if profile else []), env=env)
    finally:
        server.stop()
    assert listed.returncode == 0, listed.stderr  # what doctor must agree with
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"online\s+ok: listed 0 jobs", proc.stdout), proc.stdout
    assert "region" not in proc.stdout.split("online", 1)[1]


def test_config_set_writes_a_failover_profile_that_submit_reads(user, tmp_path):
    config, env = user
    proc = run_cli("config", "set", "--profile", "anywhere", "providers=local,docker", env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"{config}: profiles.anywhere.providers set" in proc.stdout
    from cloudtrain.spec import yamlio
    assert yamlio.read(config.read_text()).data == {"profiles": {"anywhere": {"providers": ["local", "docker"]}}}
    assert config.stat().st_mode & 0o777 == 0o600
    # the YAML list form, and the settings file stays valid for every command
    proc = run_cli("config", "set", "--profile", "two", "providers=[docker, local]", env=env)
    assert proc.returncode == 0, proc.stderr
    assert run_cli("config", "show", "--profile", "anywhere", "-p", "local", env=env).returncode == 0


@pytest.mark.parametrize("words,expected", [
    (["--profile", "x", "providers=local,sagmaker"], "unknown provider 'sagmaker'; did you mean 'sagemaker'?"),
    (["providers=local,docker"], "a failover order belongs to a profile: cloudtrain config set --profile NAME "
                                 "providers=local,docker"),
    (["--profile", "x", "providers="], "name the providers in order"),
])
def test_config_set_refuses_a_bad_failover_order_and_writes_nothing(user, words, expected):
    config, env = user
    proc = run_cli("config", "set", *words, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr and "nothing was written" in proc.stderr, proc.stderr
    assert not config.exists()


def test_a_failover_profiles_option_is_pointed_at_the_top_level(user):
    config, env = user
    run_cli("config", "set", "--profile", "anywhere", "providers=local,docker", env=env, check=0)
    before = config.read_text()
    proc = run_cli("config", "set", "--profile", "anywhere", "-p", "local", "master_port=29400", env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "is a failover order (providers: local, docker)" in proc.stderr
    assert "cloudtrain config set -p local master_port=29400 (without --profile)" in proc.stderr
    assert config.read_text() == before
