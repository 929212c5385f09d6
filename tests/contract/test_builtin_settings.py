"""What cloudtrain's own cloud providers need to submit, pinned: an account's role, bucket,
workspace, cluster or region (``Provider.required``; the contract every provider passes on it is
cloudtrain.testing's test_required_settings.py)."""
from cloudtrain.extend import plugins
from cloudtrain.extend.registry import builtin_providers

ACCOUNT_VALUES = {"sagemaker": {"role_arn", "output_s3", "region"},
                  "ec2": {"image_id", "instance_profile", "code_s3", "region"},
                  "eks": {"cluster", "region"}, "azure": {"subscription_id", "resource_group", "workspace"},
                  "tione": {"code_store", "region"}, "modelarts": {"code_store", "flavor_id", "region"}}


def test_every_built_in_cloud_provider_declares_what_it_needs():
    needs = {n: set(dict(plugins.get_provider_class(n).required)) for n in builtin_providers()}
    assert {n: v for n, v in needs.items() if v} == ACCOUNT_VALUES
