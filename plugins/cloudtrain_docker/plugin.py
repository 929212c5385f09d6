"""Registers the ``docker`` provider (entry point ``docker = "cloudtrain_docker.plugin"``)."""
from cloudtrain.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    from .provider import DockerProvider

    register(DockerProvider)
