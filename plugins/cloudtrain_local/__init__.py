"""The ``local`` provider: N emulated nodes as process groups on this machine."""
from cloudtrain.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    from .provider import LocalProvider

    register(LocalProvider)
