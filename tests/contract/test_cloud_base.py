"""Issue 15's provider core: every built-in remote platform's provider runs on ``CloudProvider``
(whose template no provider rewrites: cloudtrain.testing's test_cloud_template.py)."""
import pytest

from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.extend.plugins import get_provider_class
from cloudtrain.extend.registry import builtin_providers

ON_THIS_MACHINE = {"local", "docker"}  # they supervise processes here: not remote platforms


def remote():
    """The built-in providers of remote platforms."""
    return [n for n in builtin_providers() if n not in ON_THIS_MACHINE]


def test_the_built_in_remote_providers_are_all_here():
    assert set(remote()) >= {"sagemaker", "ec2", "eks", "azure", "tione", "modelarts", "modelarts-lite",
                             "kubeflow", "kubeflow-trainer", "volcano"}


@pytest.mark.parametrize("name", remote())
def test_every_remote_provider_is_a_cloud_provider(name):
    assert issubclass(get_provider_class(name), CloudProvider)
