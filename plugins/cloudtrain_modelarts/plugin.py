"""Registers the modelarts plugin's providers (entry point ``modelarts = "cloudtrain_modelarts.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: a provider's module (and its SDK) loads only when that provider is used
    register("cloudtrain_modelarts.provider:ModelartsProvider", name="modelarts")
    register("cloudtrain_modelarts.lite:ModelartsLiteProvider", name="modelarts-lite")


@hookimpl
def cloudtrain_register_stores(register):
    register("cloudtrain_modelarts.obsstore:ObsStore", scheme="obs")
