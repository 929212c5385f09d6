"""What the AWS providers say is true: the region variable botocore reads, the GPU counts of the
instance types they suggest, and fixes that fit the command (no job file on status/list)."""
from __future__ import annotations

import re

import pytest

from cloudtrain.errors import JobFileError
from cloudtrain.loading import load_job
from cloudtrain_aws import gpus
from cloudtrain_aws.common import AwsProvider, no_region
from cloudtrain_aws.ec2 import Ec2Provider
from cloudtrain_aws.sagemaker import SageMakerProvider
from conftest import write_job


def test_the_region_variable_named_is_the_one_botocore_reads(monkeypatch, tmp_path):
    # botocore/configprovider.py, BOTOCORE_DEFAUT_SESSION_VARIABLES:
    #   'region': ('region', 'AWS_DEFAULT_REGION', None, None)   -- AWS_REGION is not read
    from botocore.configprovider import BOTOCORE_DEFAUT_SESSION_VARIABLES
    assert BOTOCORE_DEFAUT_SESSION_VARIABLES["region"][1] == "AWS_DEFAULT_REGION"
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    assert AwsProvider.session(SageMakerProvider()).region_name == "eu-west-3"
    for provider in ("sagemaker", "ec2"):
        for message in (str(no_region(provider)), str(no_region(provider, submit=True))):
            assert "AWS_DEFAULT_REGION" in message and "AWS_REGION," not in message
    for cls in (SageMakerProvider, Ec2Provider):
        assert "AWS_DEFAULT_REGION" in cls.Options.model_fields["region"].description


def test_without_a_job_the_region_fix_names_no_job_file_option(monkeypatch, tmp_path):
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # credentials, no region: nothing can be sent
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    for cls in (SageMakerProvider, Ec2Provider):
        with pytest.raises(Exception) as info:  # list -p P, status P://NAME without a region
            cls().list()
        assert info.value.exit_code == 2 and "providers." not in str(info.value), info.value
        assert "AWS_DEFAULT_REGION" in str(info.value)
        with pytest.raises(Exception) as info:
            cls().status("some-job-0123456789ab")
        assert "providers." not in str(info.value) and f"{cls.name}://REGION/NAME" in str(info.value)
    job = load_job(write_job(tmp_path, "name: j\ncommand: python t.py\nimage: i\n"))
    message = str(no_region("sagemaker", job))
    assert "providers.sagemaker.region" in message and "AWS_DEFAULT_REGION" in message


# AWS's accelerated-computing instance table (https://aws.amazon.com/ec2/instance-types/, "Accelerated
# Computing"; /work/shared/reference/platforms.md lists ml.g5.48xlarge, ml.p4d.24xlarge, ml.p5.48xlarge
# among SageMaker's types): g5.xlarge 1 A10G, g5.12xlarge 4 A10G, g5.48xlarge 8 A10G,
# p4d.24xlarge 8 A100, p5.48xlarge 8 H100.
AWS_TABLE = {"g5.xlarge": (1, "A10G"), "g5.12xlarge": (4, "A10G"), "g5.48xlarge": (8, "A10G"),
             "p4d.24xlarge": (8, "A100"), "p5.48xlarge": (8, "H100")}


def test_the_gpu_table_holds_aws_facts_and_sagemaker_takes_its_types():
    assert gpus.GPU_TYPES == AWS_TABLE
    from botocore.session import get_session
    model = get_session().get_service_model("sagemaker")
    allowed = set(model.shape_for("TrainingInstanceType").enum)
    assert {f"ml.{kind}" for kind in gpus.GPU_TYPES} <= allowed


@pytest.mark.parametrize("cls,prefix", [(SageMakerProvider, "ml."), (Ec2Provider, "")])
def test_a_gpu_job_without_an_instance_type_gets_a_type_with_that_many_gpus(cls, prefix, tmp_path):
    def message(count: int) -> str:
        job = load_job(write_job(tmp_path, f"name: j\ncommand: python t.py\nimage: i\n"
                                           f"resources: {{gpus_per_node: {count}}}\n"))
        with pytest.raises(JobFileError) as info:
            cls.instance_type(job, cls.Options())
        return str(info.value)
    for count in (1, 4, 8):
        named = re.findall(re.escape(prefix) + r"([a-z0-9]+\.[0-9]*x?large)", message(count))
        assert named and all(AWS_TABLE[kind][0] == count for kind in named), message(count)
    two = message(2)
    assert "none has 2" in two and "1, 4 or 8 GPUs" in two, two
