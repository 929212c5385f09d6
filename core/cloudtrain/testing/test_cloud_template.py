"""A provider of a remote platform runs on ``CloudProvider``, whose template (submit: spec hash,
find, create; one status cache; idempotent cancel; the log-follow loop) is written once, in core:
the provider fills in the platform's calls and overrides none of the template's steps."""
import inspect

from cloudtrain.extend import plugins
from cloudtrain.providers.cloud import CloudProvider

TEMPLATE = ("status", "fresh_status", "logs", "_remember")
PLATFORM_CALLS = ("_create", "_describe", "_to_status", "_stop")


def providers_here(names):
    return [n for n in names if issubclass(plugins.get_provider_class(n), CloudProvider)]


def test_no_provider_rewrites_the_template(cloudtrain_provider):
    cls = plugins.get_provider_class(cloudtrain_provider)
    rewritten = [step for step in TEMPLATE if next(k for k in cls.__mro__ if step in k.__dict__) is not CloudProvider]
    assert rewritten == [], \
        f"{cloudtrain_provider} overrides {rewritten}: put the platform's part in a CloudProvider hook"


def test_the_provider_implements_the_platform_calls(cloudtrain_provider):
    cls = plugins.get_provider_class(cloudtrain_provider)
    assert not inspect.isabstract(cls)
    for call in PLATFORM_CALLS:
        assert getattr(cls, call) is not getattr(CloudProvider, call), f"{cloudtrain_provider} lacks {call}"
