"""Registers the ``local`` provider (entry point ``local = "cloudtrain_local.plugin"``)."""
from cloudtrain.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    from .provider import LocalProvider

    register(LocalProvider)
