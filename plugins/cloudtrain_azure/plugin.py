"""Registers the azure plugin's providers (entry point ``azure = "cloudtrain_azure.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: a provider's module (and its SDK) loads only when that provider is used
    register("cloudtrain_azure.provider:AzureProvider", name="azure")


@hookimpl
def cloudtrain_register_catalogs(register):
    # Azure's retail price API needs no SDK: the refresh lives outside the provider class
    register("cloudtrain_azure.prices:refresh", provider="azure")


@hookimpl
def cloudtrain_register_stores(register):
    # azureml://datastores/NAME/paths/PATH: opened through the azure provider's workspace client
    register("cloudtrain_azure.datastore:AzureMLDatastoreStore", scheme="azureml")
