"""Registers the aws plugin's providers (entry point ``aws = "cloudtrain_aws.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: a provider's module (and its SDK) loads only when that provider is used
    register("cloudtrain_aws.sagemaker:SageMakerProvider", name="sagemaker")
    register("cloudtrain_aws.ec2:Ec2Provider", name="ec2")
    register("cloudtrain_aws.eks:EksProvider", name="eks")


@hookimpl
def cloudtrain_register_stores(register):
    register("cloudtrain_aws.s3store:S3Store", scheme="s3")
