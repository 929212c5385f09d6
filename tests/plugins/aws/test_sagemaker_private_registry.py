"""sagemaker: an image in a private Docker registry reached through the job's VPC
(AlgorithmSpecification.TrainingImageConfig), and the warm pool's keep-alive up to botocore's
maximum; requests validated with botocore's service model."""
import botocore.session
import pytest

from doubles.aws_double import validate_request
from cloudtrain.spec.errors import BadInput
from test_aws_sagemaker_render import as_sent, job, render

LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:registry-credentials"
VPC = {"subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]}


def request(**options):
    return as_sent(render(job(image="registry.internal:5000/team/train:1", options=options))[
        "sagemaker/CreateTrainingJob"])


def test_a_private_registry_image_is_pulled_through_the_vpc_with_its_credentials_lambda():
    body = request(image_access="Vpc", image_credentials_lambda=LAMBDA, **VPC)
    validate_request("sagemaker", "CreateTrainingJob", body)
    assert body["AlgorithmSpecification"]["TrainingImageConfig"] == {
        "TrainingRepositoryAccessMode": "Vpc",
        "TrainingRepositoryAuthConfig": {"TrainingRepositoryCredentialsProviderArn": LAMBDA}}
    assert body["VpcConfig"]["Subnets"] == VPC["subnets"]
    # ECR (the default): no TrainingImageConfig at all
    plain = as_sent(render(job())["sagemaker/CreateTrainingJob"])
    assert "TrainingImageConfig" not in plain["AlgorithmSpecification"]


def test_the_options_follow_the_model():
    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingImageConfig")
    assert shape.members["TrainingRepositoryAccessMode"].enum == ["Platform", "Vpc"]
    with pytest.raises(BadInput, match="subnets"):
        render(job(options={"image_access": "Vpc"}))  # Vpc without the job in a VPC
    with pytest.raises(BadInput, match="image_access"):
        render(job(options={"image_credentials_lambda": LAMBDA, **VPC}))
    with pytest.raises(BadInput):
        render(job(options={"image_access": "Vpc", "image_credentials_lambda": "not-an-arn", **VPC}))


def test_keep_alive_goes_up_to_botocores_maximum():
    """botocore's sagemaker model: ResourceConfig.KeepAlivePeriodInSeconds min 0, max 21600."""
    top = botocore.session.get_session().get_service_model("sagemaker").shape_for(
        "ResourceConfig").members["KeepAlivePeriodInSeconds"].metadata["max"]
    body = request(keep_alive_seconds=top)
    validate_request("sagemaker", "CreateTrainingJob", body)
    assert body["ResourceConfig"]["KeepAlivePeriodInSeconds"] == top
    with pytest.raises(BadInput):
        render(job(options={"keep_alive_seconds": top + 1}))
