"""Registers the contract's pytest plugin (cloudtrain/testing/plugin.py) when pytest collects
this package without it (``pytest --pyargs cloudtrain.testing``); with ``-p
cloudtrain.testing.plugin`` it is there already, and ``--cloudtrain-provider`` is known."""

PLUGIN = "cloudtrain.testing.plugin"


def pytest_configure(config):
    if not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.import_plugin(PLUGIN)
