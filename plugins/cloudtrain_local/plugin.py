"""Registers the ``local`` provider (entry point ``local = "cloudtrain_local.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: the provider's module (and its pydantic models) load only when it is used
    register("cloudtrain_local.provider:LocalProvider", name="local")
