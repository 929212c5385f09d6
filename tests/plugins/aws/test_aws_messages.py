"""What the AWS providers say is true: the region variable botocore reads, the GPU counts of the
instance types they suggest, and fixes that fit the command (no job file on status/list)."""
from __future__ import annotations


import pytest

from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain_aws.common import AwsProvider, no_region
from cloudtrain_aws.ec2 import Ec2Provider
from cloudtrain_aws.instances import ec2_catalog, sagemaker_catalog
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


def test_the_catalogs_hold_aws_facts_and_sagemaker_takes_its_types():
    for kind, (count, model) in AWS_TABLE.items():
        row, ml = ec2_catalog().get(kind), sagemaker_catalog().get("ml." + kind)
        assert (row.count, row.accelerator) == (count, model) and (ml.count, ml.accelerator) == (count, model)
    from botocore.session import get_session
    model = get_session().get_service_model("sagemaker")
    allowed = set(model.shape_for("TrainingInstanceType").enum)
    assert {r.instance_type for r in sagemaker_catalog().rows} <= allowed


@pytest.mark.parametrize("cls,prefix", [(SageMakerProvider, "ml."), (Ec2Provider, "")])
def test_a_gpu_job_without_an_instance_type_gets_a_type_with_that_many_gpus(cls, prefix, tmp_path):
    def job(count: int):
        return load_job(write_job(tmp_path, f"name: j\ncommand: python t.py\nimage: i\n"
                                            f"resources: {{gpus_per_node: {count}}}\n"))
    for count in (1, 4, 8):
        with pytest.warns(CloudtrainWarning, match="its default for that count"):
            kind = cls.instance_type(job(count), cls.Options())
        assert AWS_TABLE[kind[len(prefix):]] == (count, "A10G"), kind  # the documented default: g5
    with pytest.raises(JobFileError) as info:
        cls.instance_type(job(2), cls.Options())
    assert "no default instance with 2 GPUs" in str(info.value) and "A10G x 1/4/8" in str(info.value)
    assert "resources.gpus_per_node" in str(info.value)


def test_the_constructor_takes_named_clients_a_session_and_the_poll_setting_only(monkeypatch):
    """Typed arguments, not a bag mixing clients and settings: a misspelt client is an error at
    once, a session gives the region, ``poll`` is ``CloudProvider``'s one poll setting."""
    import boto3
    monkeypatch.delenv("CLOUDTRAIN_POLL_SECONDS", raising=False)
    for cls in (SageMakerProvider, Ec2Provider):
        with pytest.raises(TypeError, match="sagemaker_client"):
            cls(sagemaker_client=object())
        session = boto3.session.Session(region_name="ap-south-2", aws_access_key_id="k", aws_secret_access_key="s")
        provider = cls(session=session, poll=0.5)
        assert provider.status_poll == 0.5 and provider.region_of(None) == "ap-south-2"
        assert provider.client("s3", "ap-south-2").meta.region_name == "ap-south-2"
        assert cls().status_poll == 5.0
        monkeypatch.setenv("CLOUDTRAIN_POLL_SECONDS", "0.25")
        assert cls().status_poll == 0.25
        monkeypatch.delenv("CLOUDTRAIN_POLL_SECONDS")
