"""The contract's pytest plugin: which providers it runs over (``--cloudtrain-provider NAME``,
repeatable, or ``CLOUDTRAIN_TEST_PROVIDERS=a,b``; default: every installed provider), the
``cloudtrain_provider`` parameter every contract test takes, and the lifecycle's
``cloudtrain_provider_double`` (the factory the provider registered with ``cloudtrain.testing.double``).

The package's conftest.py registers it when pytest collects the package; pytest learns the
option only from a plugin loaded before it reads the command line: ``-p cloudtrain.testing.plugin``
(the environment variable needs nothing)."""
from __future__ import annotations

import inspect
import os
import socket

import pytest

from cloudtrain import testing


def pytest_addoption(parser):
    parser.addoption("--cloudtrain-provider", action="append", default=[], metavar="NAME",
                     help="run cloudtrain's contract over this provider only (repeatable; default: every installed "
                          f"one; also ${testing.ENV_PROVIDERS}, comma-separated)")


def pytest_configure(config):
    """A name that is not an installed provider stops the run at once."""
    if config.getoption("cloudtrain_provider", default=None) or os.environ.get(testing.ENV_PROVIDERS):
        selected(config)


def selected(config):
    try:
        return testing.providers_under_test(config.getoption("cloudtrain_provider", default=None) or ())
    except ValueError as exc:
        raise pytest.UsageError(f"--cloudtrain-provider: {exc}") from None


def pytest_report_header(config):
    if not any("cloudtrain.testing" in str(arg) or "cloudtrain/testing" in str(arg) for arg in config.args):
        return []
    names = selected(config)
    lines = [f"cloudtrain contract over: {', '.join(names)}"]
    lines += [f"cloudtrain lifecycle contract leaves out {n}: {why}" for n, why in sorted(testing.NO_DOUBLE.items())
              if n in names]
    return lines


def pytest_generate_tests(metafunc):
    """Every contract test taking ``cloudtrain_provider`` runs once per provider under test; a
    module narrows them with ``providers_here(names) -> names`` (e.g. the cloud providers only)."""
    if "cloudtrain_provider" not in metafunc.fixturenames:
        return
    names = selected(metafunc.config)
    narrow = getattr(metafunc.module, "providers_here", None)
    if narrow is not None:
        names = narrow(names)
    metafunc.parametrize("cloudtrain_provider", names)


@pytest.fixture(autouse=True)
def _in_a_scratch_directory(tmp_path, monkeypatch):
    """A job's ``code: .`` is the working directory: a scratch one, never where pytest runs."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def code_dir(tmp_path):
    """A small training directory a contract job ships."""
    path = tmp_path / "contract-code"
    path.mkdir(exist_ok=True)
    (path / "train.py").write_text("print('contract')\n")
    return path


@pytest.fixture
def offline(monkeypatch):
    """Any network connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("this must not touch the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def cloudtrain_provider_double(request, cloudtrain_provider):
    """The provider's double: what its registered factory returns (or yields)."""
    factory = testing.factory_for(cloudtrain_provider)
    if factory is None:
        pytest.fail(f"{cloudtrain_provider} has no double for the lifecycle contract: register one with "
                    f"@cloudtrain.testing.double({cloudtrain_provider!r}) in a module pytest loads (-p MODULE), "
                    f"or say why it has none with cloudtrain.testing.no_double({cloudtrain_provider!r}, why)",
                    pytrace=False)
    made = factory(request)
    if not inspect.isgenerator(made):
        yield made
        return
    yield next(made)
    next(made, None)
