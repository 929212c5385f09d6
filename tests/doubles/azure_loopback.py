"""Test plugin: provider ``azure`` whose MLClient talks to the fake Azure on 127.0.0.1.

For ``cloudtrain`` subprocesses: ``CLOUDTRAIN_PLUGINS=doubles.azure_loopback``,
``CLOUDTRAIN_DISABLE_PLUGINS=azure`` (the real registration) and ``CT_AZURE_FAKE_PORT``.  Only
the injected clients differ from the real provider: a token credential, the loopback
transport, and short poll intervals.
"""
import os

from cloudtrain.extend.hookspecs import hookimpl
from cloudtrain_azure.provider import AzureProvider
from doubles.azure_double import FakeCredential, LoopbackTransport


class LoopbackAzureProvider(AzureProvider):
    def __init__(self, poll=0.05, **kwargs):
        kwargs.setdefault("credential", FakeCredential())
        kwargs.setdefault("client_kwargs", {"transport": LoopbackTransport(int(os.environ["CT_AZURE_FAKE_PORT"]))})
        super().__init__(poll=poll, **kwargs)


@hookimpl
def cloudtrain_register_providers(register):
    register(LoopbackAzureProvider)
