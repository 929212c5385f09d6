"""The no-silent-drop contract (cloudtrain.testing's test_no_silent_drop.py) covers every built-in
cloud provider: they come from cloudtrain's entry points, the test plugin and the providers that
run the job on this machine are not among them."""
from cloudtrain.extend.registry import builtin_providers
from cloudtrain.testing.probes import cloud_providers


def test_the_cloud_providers_come_from_the_entry_points():
    names = cloud_providers(builtin_providers())
    assert {"sagemaker", "ec2", "eks", "azure", "tione", "modelarts", "modelarts-lite", "kubeflow",
            "kubeflow-trainer", "volcano"} <= set(names)
    assert "fakeone" not in names and "local" not in names and "docker" not in names
