"""cloudtrain's own pins of the provider contract: the built-in and test plugins are registered,
and each platform's injected environment means what platform_cases.py pins (the rules every
provider passes, render and round-trip, are cloudtrain.testing's test_render.py:
``pytest --pyargs cloudtrain.testing``)."""
import pytest

from cloudtrain.extend import plugins
from cloudtrain.extend.registry import builtin_providers
from platform_cases import SEMANTICS, cases_for

PROVIDERS = sorted(plugins.providers())


def test_builtin_and_test_plugins_are_registered():
    assert "local" in PROVIDERS and "fakeone" in PROVIDERS
    assert set(builtin_providers()) <= set(PROVIDERS) and "fakeone" not in builtin_providers()


@pytest.mark.parametrize("name,case", [(n, c) for n in PROVIDERS for c in cases_for(n)],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_platform_semantics(name, case):
    environ, expected = case
    topo = plugins.get_provider_class(name).detect(environ)
    assert topo is not None
    for field, value in expected.items():
        assert getattr(topo, field) == value, f"{field}: {getattr(topo, field)!r} != {value!r}"


def test_tione_semantics_are_pinned():
    """TI-ONE's case runs today through a test double; the real plugin inherits it."""
    assert [n for n, target in SEMANTICS.items() if target == "tione" and n in PROVIDERS]
    assert cases_for("tione")
