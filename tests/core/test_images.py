"""Issue 30, item 5 (core): validate says what SageMaker, TI-ONE and ModelArts pull and warns on a
Docker Hub image there; ``providers.<p>.image`` from a profile is that provider's image."""

import pytest

from cloudtrain.providers.images import is_docker_hub, registry_host
from conftest import run_cli, write_job

HUB = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
OWN = {"sagemaker": ("123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1", "ECR", "TrainingImage"),
       "tione": ("ccr.ccs.tencentyun.com/team/train:1", "CCR", "ImageUrl"),
       "modelarts": ("swr.cn-north-4.myhuaweicloud.com/team/train:1", "SWR", "image_url")}


@pytest.mark.parametrize("image,host,hub", [
    ("pytorch/pytorch:2.4", None, True), ("python:3.11", None, True), ("docker.io/library/python:3", "docker.io", True),
    ("localhost/x:1", "localhost", False), ("registry.example:5000/a/b", "registry.example:5000", False),
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com/t:1", "123456789012.dkr.ecr.us-east-1.amazonaws.com", False),
])
def test_the_registry_of_an_image_reference(image, host, hub):
    assert registry_host(image) == host and is_docker_hub(image) is hub


@pytest.mark.parametrize("provider", sorted(OWN))
def test_validate_warns_on_a_docker_hub_image_and_says_what_the_platform_pulls(tmp_path, provider):
    job = write_job(tmp_path, f"name: hub\ncommand: python t.py\nimage: {HUB}\n")
    proc = run_cli("validate", "-p", provider, job)
    warning = [line for line in proc.stderr.splitlines() if "is on Docker Hub" in line]
    assert len(warning) == 1, proc.stderr
    assert warning[0].startswith(f"cloudtrain: warning: {job}:3: image: {HUB} is on Docker Hub, but {provider} pulls")
    assert OWN[provider][1] in warning[0] and "https://" in warning[0] and f"providers.{provider}.image" in warning[0]


@pytest.mark.parametrize("provider", sorted(OWN))
def test_a_profiles_platform_image_replaces_the_top_level_one_for_that_provider(tmp_path, provider):
    image, _, key = OWN[provider]
    config = tmp_path / "config.yaml"
    config.write_text(f"profiles:\n  cn:\n    providers:\n      {provider}: {{image: '{image}'}}\n")
    job = write_job(tmp_path / "code", f"name: hub\ncommand: python t.py\nimage: {HUB}\n")
    proc = run_cli("render", "-p", provider, "--profile", "cn", job, "-o", "json",
                   env={"CLOUDTRAIN_CONFIG": str(config)}, check=0)
    assert "is on Docker Hub" not in proc.stderr
    text = proc.stdout
    assert f'"{key}": "{image}"' in text and HUB not in text
    assert HUB in run_cli("render", "-p", "docker", job, "-o", "json", env={"CLOUDTRAIN_CONFIG": str(config)},
                          check=0).stdout  # the other providers keep `image`


@pytest.mark.parametrize("provider", ["docker", "kubeflow", "volcano"])
def test_providers_that_pull_from_docker_hub_do_not_warn(tmp_path, provider):
    job = write_job(tmp_path, f"name: hub\ncommand: python t.py\nimage: {HUB}\n")
    assert "Docker Hub" not in run_cli("render", "-p", provider, job, check=0).stderr
