"""Registers the tione plugin's providers (entry point ``tione = "cloudtrain_tione.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: a provider's module (and its SDK) loads only when that provider is used
    register("cloudtrain_tione.provider:TioneProvider", name="tione")


@hookimpl
def cloudtrain_register_stores(register):
    # cos://BUCKET-APPID/prefix through cos-python-sdk-v5, imported when a store is used
    register("cloudtrain_tione.cosstore:CosStore", scheme="cos")
