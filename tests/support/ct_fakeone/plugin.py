"""Registers the ``fakeone`` provider; the class is imported only when the provider is used."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    register("ct_fakeone.provider:FakeOneProvider", name="fakeone")
