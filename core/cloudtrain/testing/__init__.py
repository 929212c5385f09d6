"""cloudtrain's contract suite, for every provider, built-in or third-party.

Run it against the installed providers, or only yours::

    pytest --pyargs cloudtrain.testing                                  # every installed provider
    CLOUDTRAIN_TEST_PROVIDERS=acme pytest --pyargs cloudtrain.testing  # only acme (comma-separated)
    pytest -p cloudtrain.testing.plugin --pyargs cloudtrain.testing --cloudtrain-provider acme
    pytest --pyargs cloudtrain.testing -p acme_tests.double            # with acme's double (below)

(pytest reads ``--cloudtrain-provider`` only from a plugin loaded before the command line:
``-p cloudtrain.testing.plugin``, which the package's conftest.py otherwise registers itself.)

What lives where: ``plugin.py`` the pytest wiring (option, parameters, fixtures); ``jobs.py`` and
``probes.py`` the jobs and probe values (no pytest); the contract, one module per rule:

- ``test_render.py``: render is deterministic and offline, secrets are masked, the envelope is
  well formed, unknown options are refused at their line, ``environment()``/``detect()`` round-trip;
- ``test_detection.py``: a node of the provider's platform is recognised without naming it;
- ``test_required_settings.py``: ``Provider.required`` is what ``validate`` asks for;
- ``test_no_silent_drop.py``: every neutral job field is rendered, refused or warned about;
- ``test_storage.py``: ``storage`` URIs of a scheme the provider does not take are refused at their line;
- ``test_cloud_template.py``: a ``CloudProvider`` fills in the platform calls, never the template;
- ``test_lifecycle.py``: over the provider's own double (below): submit twice is one job, cancel
  is idempotent and ends the job, every raw state maps, logs are well-formed lines.

A provider hands the lifecycle contract its double by registering a factory, in a module pytest
loads as a plugin (``-p MODULE``, or ``pytest_plugins`` in a top-level conftest.py)::

    from cloudtrain.testing import ProviderDouble, double

    @double("acme")
    def acme_double(request):                 # request: pytest's FixtureRequest
        server = AcmeFake().start()           # the platform, on 127.0.0.1
        request.addfinalizer(server.stop)
        return ProviderDouble(provider=AcmeProvider(endpoint=server.url, poll=0), job=lambda: ...,
                              set_state=server.set_status, write_log=server.add_log_lines)

A factory may also ``yield`` its double (what follows the ``yield`` runs after the test).  A
provider with no double fails the lifecycle contract, unless it is registered with
``no_double(name, why)``.

Importing this package imports neither pytest nor any provider.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence

ENV_PROVIDERS = "CLOUDTRAIN_TEST_PROVIDERS"


def builtin_providers() -> List[str]:
    """The sorted names of cloudtrain's built-in providers (``cloudtrain.extend.registry``: those of the
    plugins cloudtrain's own distribution names as entry points)."""
    from cloudtrain.extend.registry import builtin_providers as from_entry_points
    return from_entry_points()


def installed_providers() -> List[str]:
    """Every provider the plugin manager knows (built-in, third-party and test plugins)."""
    from cloudtrain.extend import plugins
    return sorted(plugins.providers())


def providers_under_test(named: Iterable[str] = ()) -> List[str]:
    """The providers the contract runs over: those ``named`` (by option or by the environment's
    comma-separated ``CLOUDTRAIN_TEST_PROVIDERS``), else every installed one.  A name that is not
    installed is a ``ValueError``."""
    names = [n for n in named if n]
    names += [n.strip() for n in os.environ.get(ENV_PROVIDERS, "").split(",") if n.strip()]
    installed = installed_providers()
    if not names:
        return installed
    unknown = sorted(set(names) - set(installed))
    if unknown:
        raise ValueError(f"not an installed provider: {', '.join(unknown)} (installed: {', '.join(installed)})")
    return sorted(set(names))


@dataclass
class ProviderDouble:
    """A provider pointed at a double of its platform, and the handles the contract drives it by.

    - ``provider``: the configured instance (it reads the platform afresh on every ``status``:
      construct it with ``poll=0``);
    - ``job()``: a job the provider submits (the same spec on every call);
    - ``set_state(job_id, raw)``: the platform reports raw state ``raw`` for the job from now on
      (any string: the contract also sets one the provider's ``states`` table lacks);
    - ``write_log(job_id, lines)``: the job logged these lines (without their newlines).
    """

    provider: object
    job: Callable[[], object]
    set_state: Callable[[str, str], None]
    write_log: Callable[[str, Sequence[str]], None]


Factory = Callable[[object], object]
DOUBLES: Dict[str, Factory] = {}
NO_DOUBLE: Dict[str, str] = {}


def double(name: str) -> Callable[[Factory], Factory]:
    """Register ``factory(request) -> ProviderDouble`` (or a generator yielding one) for provider ``name``."""
    def register(factory: Factory) -> Factory:
        DOUBLES[name] = factory
        return factory
    return register


def no_double(name: str, why: str) -> None:
    """Say that provider ``name`` has no double of its platform, and why: the lifecycle contract
    leaves it out (and says so in the test run's header) instead of failing it."""
    NO_DOUBLE[name] = why


def lifecycle_providers(names: Iterable[str]) -> List[str]:
    return [n for n in names if n not in NO_DOUBLE]


def factory_for(name: str) -> Optional[Factory]:
    return DOUBLES.get(name)
