"""Issue 15's provider core: every remote platform's provider runs on ``CloudProvider``, whose
template (submit = spec hash, then find, then create; one status cache and poll setting;
idempotent cancel; the log-follow loop) is written once, in core.  A provider fills in the
platform's calls and overrides none of the template's steps."""
import inspect

import pytest

from cloudtrain.cloud import CloudProvider
from cloudtrain.plugins import get_provider_class, providers
from cloudtrain.registry import builtin_providers

ON_THIS_MACHINE = {"local", "docker"}  # they supervise processes here: not remote platforms
TEMPLATE = ("status", "fresh_status", "logs", "_remember")
PLATFORM_CALLS = ("_create", "_describe", "_to_status", "_stop")


BUILT_IN = {providers()[n].plugin for n in builtin_providers()}  # plugins


def remote():
    """The built-in providers of remote platforms (the test plugin fakeone emulates one locally)."""
    return sorted(n for n, info in providers().items() if n not in ON_THIS_MACHINE and info.plugin in BUILT_IN)


def test_the_built_in_remote_providers_are_all_here():
    assert set(remote()) >= {"sagemaker", "ec2", "eks", "azure", "tione", "modelarts", "modelarts-lite",
                             "kubeflow", "kubeflow-trainer", "volcano"}


@pytest.mark.parametrize("name", remote())
def test_every_remote_provider_is_a_cloud_provider(name):
    assert issubclass(get_provider_class(name), CloudProvider)


@pytest.mark.parametrize("name", remote())
def test_no_provider_rewrites_the_template(name):
    cls = get_provider_class(name)
    rewritten = [step for step in TEMPLATE
                 if next(k for k in cls.__mro__ if step in k.__dict__) is not CloudProvider]
    assert rewritten == [], f"{name} overrides {rewritten}: put the platform's part in a CloudProvider hook"


@pytest.mark.parametrize("name", remote())
def test_every_remote_provider_implements_the_platform_calls(name):
    cls = get_provider_class(name)
    assert not inspect.isabstract(cls)
    for call in PLATFORM_CALLS:
        assert getattr(cls, call) is not getattr(CloudProvider, call), f"{name} lacks {call}"
